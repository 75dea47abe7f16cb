#include <gtest/gtest.h>

#include <set>

#include "models/model_zoo.h"

namespace diffattn {
namespace {

const ModelSpec& model(const char* name) {
  auto m = find_model(name);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return **m;
}

std::int64_t tokens(const char* name, int h, int w, int f) {
  auto t = video_tokens(model(name), h, w, f);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? *t : -1;
}

const ModelRole& role(const ModelSpec& m, const std::string& name) {
  for (const ModelRole& r : m.roles)
    if (r.role == name) return r;
  ADD_FAILURE() << m.name << " has no role " << name;
  return m.roles.front();
}

TEST(ModelZoo, EveryIssueModelIsPresent) {
  for (const char* name : {"tiny-dit", "wan2.1-1.3b", "wan2.1-14b", "wan2.2-ti2v-5b", "hunyuanvideo-1.5",
                           "flux.1-dev", "sd3-medium", "sd3.5-large", "ltx-2", "cogvideox-5b"})
    EXPECT_TRUE(find_model(name).ok()) << name;
}

TEST(ModelZoo, PublishedTokenCounts) {
  EXPECT_EQ(tokens("wan2.1-14b", 480, 832, 81), 32760);
  EXPECT_EQ(tokens("wan2.1-14b", 720, 1280, 81), 75600);
  EXPECT_EQ(tokens("wan2.1-1.3b", 480, 832, 17), 7800);
  EXPECT_EQ(tokens("wan2.1-1.3b", 480, 832, 121), 48360);
  EXPECT_EQ(tokens("wan2.2-ti2v-5b", 704, 1280, 49), 11440);
  EXPECT_EQ(tokens("wan2.2-ti2v-5b", 704, 1280, 121), 27280);
  EXPECT_EQ(tokens("hunyuanvideo-1.5", 480, 832, 33), 14040);
  EXPECT_EQ(tokens("hunyuanvideo-1.5", 720, 1280, 121), 111600);
  EXPECT_EQ(tokens("flux.1-dev", 1024, 1024, 1), 4096);
  EXPECT_EQ(tokens("sd3-medium", 1024, 1024, 1), 4096);
  EXPECT_EQ(tokens("cogvideox-5b", 480, 720, 49), 17550);
  EXPECT_EQ(tokens("ltx-2", 512, 768, 121), 6144);
}

TEST(ModelZoo, JointSequencesAddTextTokens) {
  const ModelSpec& flux = model("flux.1-dev");
  auto flux_shape = role_shape(flux, role(flux, "flux.double_stream"), 1024, 1024, 1);
  ASSERT_TRUE(flux_shape.ok());
  EXPECT_EQ(flux_shape->query_tokens, 4608);
  EXPECT_EQ(flux_shape->key_tokens, 4608);
  const ModelSpec& sd3 = model("sd3-medium");
  auto sd3_shape = role_shape(sd3, sd3.roles.front(), 1024, 1024, 1);
  ASSERT_TRUE(sd3_shape.ok());
  EXPECT_EQ(sd3_shape->query_tokens, 4429);
  EXPECT_EQ(sd3.roles.front().head_size, 64);
  EXPECT_EQ(sd3.roles.front().num_heads, 24);
  const ModelSpec& cog = model("cogvideox-5b");
  auto cog_shape = role_shape(cog, cog.roles.front(), 480, 720, 49);
  ASSERT_TRUE(cog_shape.ok());
  EXPECT_EQ(cog_shape->query_tokens, 17776);
}

TEST(ModelZoo, CrossAttentionUsesTextKeys) {
  const ModelSpec& wan = model("wan2.1-14b");
  auto shape = role_shape(wan, role(wan, "cross"), 480, 832, 81);
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape->query_tokens, 32760);
  EXPECT_EQ(shape->key_tokens, 512);
  EXPECT_EQ(role(wan, "cross").category.value_or(""), "cross");
  EXPECT_EQ(role(wan, "self").num_heads, 40);
  EXPECT_EQ(role(wan, "self").layers, 40);
}

TEST(ModelZoo, Ltx2AudioVideoRolesAreCrossCategory) {
  const ModelSpec& ltx = model("ltx-2");
  EXPECT_EQ(audio_tokens(ltx, 121), 121);
  for (const char* r : {"ltx2.audio_to_video", "ltx2.video_to_audio", "cross", "ltx2.audio_cross"})
    EXPECT_EQ(role(ltx, r).category.value_or(""), "cross") << r;
  auto a2v = role_shape(ltx, role(ltx, "ltx2.audio_to_video"), 512, 768, 121);
  ASSERT_TRUE(a2v.ok());
  EXPECT_EQ(a2v->query_tokens, 6144);
  EXPECT_EQ(a2v->key_tokens, 121);
  EXPECT_EQ(role(ltx, "ltx2.audio_self").head_size, 64);
  EXPECT_EQ(role(ltx, "self").head_size, 128);
}

TEST(ModelZoo, MaskFreedomFollowsTheModel) {
  EXPECT_TRUE(model("wan2.1-14b").attention_mask_free);
  EXPECT_TRUE(model("wan2.2-ti2v-5b").attention_mask_free);
  EXPECT_FALSE(model("flux.1-dev").attention_mask_free);
}

TEST(ModelZoo, EveryModelHasASourceAndValidRoles) {
  std::set<std::string> names;
  for (const ModelSpec& m : model_zoo()) {
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
    EXPECT_FALSE(m.source.empty()) << m.name;
    for (const ModelRole& r : m.roles) {
      EXPECT_TRUE(r.category.has_value()) << m.name << "/" << r.role;
      EXPECT_EQ(r.num_heads % r.num_kv_heads, 0);
      EXPECT_EQ(r.head_size % 8, 0);
    }
    auto defaults = video_tokens(m, m.default_height, m.default_width, m.default_frames);
    EXPECT_TRUE(defaults.ok()) << m.name << ": " << defaults.status().message();
  }
}

TEST(ModelZoo, UnknownModelListsTheKnownOnes) {
  auto m = find_model("wan9");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kInvalidConfig);
  EXPECT_NE(m.status().message().find("wan9"), std::string::npos);
  EXPECT_NE(m.status().message().find("wan2.2-ti2v-5b"), std::string::npos);
  EXPECT_NE(m.status().message().find("flux.1-dev"), std::string::npos);
}

TEST(ModelZoo, BadResolutionSaysWhatToUse) {
  auto t = video_tokens(model("wan2.1-14b"), 480, 830, 81);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("832"), std::string::npos) << t.status().message();
  auto f = video_tokens(model("wan2.1-14b"), 480, 832, 80);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("4k+1"), std::string::npos) << f.status().message();
  EXPECT_FALSE(video_tokens(model("flux.1-dev"), 1024, 1024, 5).ok());
}

TEST(ModelZoo, JointModelsSayWhereTheirTextSits) {
  EXPECT_EQ(model("flux.1-dev").joint_text, "first");
  EXPECT_EQ(model("cogvideox-5b").joint_text, "first");
  EXPECT_EQ(model("sd3-medium").joint_text, "last");
  EXPECT_EQ(model("sd3.5-large").joint_text, "last");
  EXPECT_EQ(model("hunyuanvideo-1.5").joint_text, "last");
  for (const ModelSpec& m : model_zoo())
    for (const ModelRole& r : m.roles)
      if (r.key_tokens == "joint") EXPECT_FALSE(m.joint_text.empty()) << m.name;
  auto bad = parse_model_zoo(R"({"models":[{"name":"x","joint_text":"middle","vae":{"temporal":1,"spatial":8},
      "patch":[1,2,2],"defaults":{"height":64,"width":64,"frames":1,"steps":1},
      "roles":[{"role":"joint","heads":4,"kv_heads":4,"head_size":64,"layers":1,"query":"joint","key":"joint"}]}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("joint_text"), std::string::npos) << bad.status().message();
}

TEST(ModelZoo, MalformedZooIsRejectedWithTheField) {
  EXPECT_FALSE(parse_model_zoo("not json").ok());
  auto r = parse_model_zoo(R"({"models":[{"name":"x","vae":{"temporal":1,"spatial":8},"patch":[1,2,2],
      "defaults":{"height":64,"width":64,"frames":1,"steps":1},
      "roles":[{"role":"self","heads":6,"kv_heads":4,"head_size":64,"layers":1}]}]})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kv_heads"), std::string::npos) << r.status().message();
  auto wrong_type = parse_model_zoo(R"({"models":[{"name":"x","vae":{"temporal":1,"spatial":8},"patch":["a",2,2],
      "defaults":{"height":64,"width":64,"frames":1,"steps":1},"roles":[]}]})");
  EXPECT_FALSE(wrong_type.ok());
}

TEST(ModelZoo, RepeatedKeysAreRejectedByName) {
  auto r = parse_model_zoo(R"({"models":[{"name":"x","vae":{"temporal":1,"spatial":8},"patch":[1,2,2],
      "defaults":{"height":64,"width":64,"frames":1,"steps":1},
      "roles":[{"role":"self","heads":4,"kv_heads":4,"head_size":64,"layers":1,"layers":2}]}]})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'models.[].roles.[].layers' appears twice"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace diffattn
