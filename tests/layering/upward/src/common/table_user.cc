// A core file that reaches up into the CLI: cmake/CheckLayers.cmake must report it.
#include "cli/output.h"
