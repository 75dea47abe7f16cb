# Embeds models/zoo.json into the library so `diffattn` finds its model zoo from any directory.
# Re-runs at configure time whenever the JSON changes.
set(DIFFATTN_ZOO_JSON ${PROJECT_SOURCE_DIR}/models/zoo.json)
set(DIFFATTN_ZOO_CC ${PROJECT_BINARY_DIR}/generated/embedded_zoo.cc)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${DIFFATTN_ZOO_JSON})
file(READ ${DIFFATTN_ZOO_JSON} DIFFATTN_ZOO_TEXT)
string(FIND "${DIFFATTN_ZOO_TEXT}" ")zoo\"" DIFFATTN_ZOO_DELIMITER_AT)
if(NOT DIFFATTN_ZOO_DELIMITER_AT EQUAL -1)
  message(FATAL_ERROR "models/zoo.json contains the raw-string delimiter )zoo\" and cannot be embedded")
endif()
file(CONFIGURE OUTPUT ${DIFFATTN_ZOO_CC} CONTENT
"// Generated from models/zoo.json by cmake/EmbedModels.cmake; edit the JSON, not this file.
namespace diffattn::internal {
extern const char* const kEmbeddedModelZooJson;
const char* const kEmbeddedModelZooJson = R\"zoo(@DIFFATTN_ZOO_TEXT@)zoo\";
}  // namespace diffattn::internal
" @ONLY)
target_sources(diffattn_core PRIVATE ${DIFFATTN_ZOO_CC})
