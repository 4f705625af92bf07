#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/safetensors.h"

using namespace tessera;
namespace fs = std::filesystem;

namespace {

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("tessera_st_" + std::to_string(::getpid()) + "_" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  Tensor f32(Shape shape, float start) {
    Tensor t = Tensor::empty(DType::F32, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = start + float(i);
    return t;
  }
  void write_raw(const fs::path& p, const std::string& header, size_t data_bytes) {
    std::ofstream out(p, std::ios::binary);
    uint64_t n = header.size();
    out.write(reinterpret_cast<char*>(&n), 8);
    out << header << std::string(data_bytes, '\0');
  }
  std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir;
};

TEST_F(Safetensors, RoundTripIsAZeroCopyView) {
  write_safetensors(dir / "model.safetensors", {{"a", f32({2, 3}, 0)}, {"b", f32({4}, 10)}}, {{"format", "pt"}});
  SafetensorsFile f(dir / "model.safetensors");
  Tensor a = f.get("a"), b = f.get("b");
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.data<float>()[5], 5.0f);
  EXPECT_EQ(b.data<float>()[3], 13.0f);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.raw()) - reinterpret_cast<uintptr_t>(a.raw()), 24u);  // same mapping
}

TEST_F(Safetensors, ViewsOutliveTheFileObject) {
  write_safetensors(dir / "x.safetensors", {{"a", f32({3}, 1)}});
  Tensor a;
  { a = SafetensorsFile(dir / "x.safetensors").get("a"); }
  EXPECT_EQ(a.data<float>()[2], 3.0f);
}

TEST_F(Safetensors, TruncatedFileNamesTheFileAndTensor) {
  write_safetensors(dir / "t.safetensors", {{"w", f32({64}, 0)}});
  fs::resize_file(dir / "t.safetensors", fs::file_size(dir / "t.safetensors") - 10);
  auto msg = error_of([&] { SafetensorsFile f(dir / "t.safetensors"); });
  EXPECT_NE(msg.find("t.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"w\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST_F(Safetensors, MalformedInputsAreClearErrors) {
  auto p = dir / "bad.safetensors";
  std::ofstream(p) << "abc";
  EXPECT_NE(error_of([&] { SafetensorsFile f(p); }).find("not a safetensors file"), std::string::npos);
  write_raw(p, "{not json", 0);
  EXPECT_NE(error_of([&] { SafetensorsFile f(p); }).find("malformed"), std::string::npos);
  write_raw(p, R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,2]}})", 2);
  EXPECT_NE(error_of([&] { SafetensorsFile f(p); }).find("unsupported dtype \"Q4\""), std::string::npos);
  write_raw(p, R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8);
  EXPECT_NE(error_of([&] { SafetensorsFile f(p); }).find("does not match shape"), std::string::npos);
  write_raw(p, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12);
  EXPECT_NE(error_of([&] { SafetensorsFile f(p); }).find("overlap"), std::string::npos);
  // A header length beyond the file.
  {
    std::ofstream out(p, std::ios::binary);
    uint64_t n = 1 << 20;
    out.write(reinterpret_cast<char*>(&n), 8);
    out << "{}";
  }
  EXPECT_NE(error_of([&] { SafetensorsFile f(p); }).find("exceeds file size"), std::string::npos);
}

TEST_F(Safetensors, ShardedIndexAndShapeChecks) {
  write_safetensors(dir / "model-00001-of-00002.safetensors", {{"a", f32({2}, 0)}});
  write_safetensors(dir / "model-00002-of-00002.safetensors", {{"b", f32({3}, 5)}});
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})";
  WeightStore w(dir);
  EXPECT_EQ(w.get("b", {3}).data<float>()[0], 5.0f);
  EXPECT_NE(error_of([&] { w.get("b", {4}); }).find("tensor \"b\" has shape [3], expected [4]"), std::string::npos);
  EXPECT_NE(error_of([&] { w.get("c"); }).find("missing tensor \"c\""), std::string::npos);

  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"weight_map":{"a":"model-00002-of-00002.safetensors"}})";
  EXPECT_NE(error_of([&] { WeightStore bad(dir); }).find("not in its shard"), std::string::npos);
}

TEST_F(Safetensors, DirectoryWithoutWeights) {
  EXPECT_NE(error_of([&] { WeightStore w(dir); }).find("no model.safetensors"), std::string::npos);
}

}  // namespace
