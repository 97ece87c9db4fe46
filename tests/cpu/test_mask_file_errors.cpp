// Malformed mask files: every defect of the header or metadata is a tessera::Error(kFormatError) naming the field
// (read_mask_file: and the path), never a crash, an allocation failure, a library exception or a silent wrap-around.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessera/error.hpp"
#include "tessera_corpus/family.hpp"
#include "tessera_corpus/mask_file.hpp"
#include "temp_path.hpp"

using namespace tessera::corpus;
using nlohmann::json;

namespace {

// The safetensors bytes of a small valid case.
std::vector<std::uint8_t> good_file() {
  CorpusOptions opt;
  opt.small = true;
  return encode_mask_file(make_case("Q64K64", 0, opt));
}

// Splits safetensors bytes into the JSON header and the data bytes.
std::pair<json, std::vector<std::uint8_t>> split(const std::vector<std::uint8_t>& b) {
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t(b[std::size_t(i)]) << (8 * i);
  return {json::parse(b.begin() + 8, b.begin() + 8 + std::int64_t(n)),
          std::vector<std::uint8_t>(b.begin() + 8 + std::int64_t(n), b.end())};
}

// Safetensors bytes of a header and data.
std::vector<std::uint8_t> join(const json& header, const std::vector<std::uint8_t>& data) {
  std::string h = header.dump();
  while (h.size() % 8) h.push_back(' ');
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[std::size_t(i)] = char(std::uint64_t(h.size()) >> (8 * i));
  const std::string head = len + h;
  std::vector<std::uint8_t> out(head.begin(), head.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// The good file with its header changed by `edit` and its data replaced by `data` when given.
std::vector<std::uint8_t> crafted(const std::function<void(json&)>& edit,
                                  const std::vector<std::uint8_t>* data = nullptr) {
  auto [h, d] = split(good_file());
  edit(h);
  return join(h, data ? *data : d);
}

// decode_mask_file(bytes) throws kFormatError whose message contains `field`.
void expect_format_error(const std::vector<std::uint8_t>& bytes, const std::string& field, const std::string& what) {
  try {
    decode_mask_file(bytes);
    ADD_FAILURE() << what << ": accepted";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), tessera::ErrorCode::kFormatError) << what << ": " << e.what();
    EXPECT_NE(e.message().find(field), std::string::npos) << what << ": " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": not a tessera::Error: " << e.what();
  }
}

void set_meta(json& h, const char* key, const std::string& v) { h["__metadata__"][key] = v; }

}  // namespace

TEST(MaskFileErrors, GoodFileDecodes) {
  ASSERT_NO_THROW(decode_mask_file(good_file()));
  ASSERT_NO_THROW(decode_mask_file(crafted([](json&) {})));
}

// heads x n_qb x ceil(n_kvb / 8) overflowing to 0 used to pass the shape check and read out of bounds.
TEST(MaskFileErrors, ByteSizeOverflowRejected) {
  const std::vector<std::uint8_t> none;
  const auto overflow = [](std::uint64_t heads, std::uint64_t n_qb) {
    return [=](json& h) {
      set_meta(h, "heads", std::to_string(heads));
      set_meta(h, "n_qb", std::to_string(n_qb));
      set_meta(h, "n_q", std::to_string(n_qb));
      set_meta(h, "n_kvb", "8");
      set_meta(h, "n_kv", "8");
      set_meta(h, "block_q", "1");
      set_meta(h, "block_kv", "1");
      h["mask"]["shape"] = {1, heads, n_qb, 1};
      h["mask"]["data_offsets"] = {0, 0};
    };
  };
  // 2^31 - 1 heads x 2^62 rows x 1 byte overflows int64; 2^32 heads is out of range for the metadata field.
  expect_format_error(crafted(overflow(2147483647u, std::uint64_t(1) << 62), &none), "overflow", "overflow");
  expect_format_error(crafted(overflow(std::uint64_t(1) << 32, std::uint64_t(1) << 32), &none), "'heads'",
                      "2^32 heads");
  EXPECT_THROW(PackedMask(std::int64_t(1) << 32, std::int64_t(1) << 32, 8), tessera::Error);
  std::int64_t bytes = 0;
  EXPECT_FALSE(packed_mask_bytes(std::int64_t(1) << 32, std::int64_t(1) << 32, 8, &bytes));
  EXPECT_TRUE(packed_mask_bytes(3, 5, 9, &bytes));
  EXPECT_EQ(bytes, 30);
}

// A huge declared size that the file does not hold is a format error before any allocation (was std::bad_alloc).
TEST(MaskFileErrors, DeclaredSizeLargerThanFileRejected) {
  const std::vector<std::uint8_t> none;
  const auto huge = crafted(
      [](json& h) {
        const std::uint64_t n = std::uint64_t(1) << 40;
        set_meta(h, "heads", "1");
        set_meta(h, "n_qb", std::to_string(n));
        set_meta(h, "n_q", std::to_string(n));
        set_meta(h, "n_kvb", "8");
        set_meta(h, "n_kv", "8");
        set_meta(h, "block_q", "1");
        set_meta(h, "block_kv", "1");
        h["mask"]["shape"] = {1, 1, n, 1};
        h["mask"]["data_offsets"] = {0, n};
      },
      &none);
  expect_format_error(huge, "bytes", "1 TiB declared, none stored");
  expect_format_error(crafted([](json& h) { h["mask"]["data_offsets"][1] = 3; }), "'data_offsets'", "short offsets");
  expect_format_error(crafted([](json& h) { h["mask"]["data_offsets"] = {-1, 5}; }), "'data_offsets'", "negative");
}

// Metadata integers are parsed strictly: whole string, decimal, in range.
TEST(MaskFileErrors, MetadataIntegersParsedStrictly) {
  struct Bad {
    const char* key;
    std::string value;
  };
  const std::vector<Bad> bad = {
      {"seed", "abc"},        {"seed", "-1"},          {"seed", "12x"},         {"seed", ""},
      {"seed", " 5"},         {"seed", "18446744073709551616"},
      {"block_q", "4294967360"},  // 2^32 + 64: used to wrap around to 64
      {"block_q", "0"},       {"block_q", "-64"},      {"block_kv", "+64"},     {"step", "-1"},
      {"layer", "1.5"},       {"chunk", "2147483648"}, {"index", "0x10"},       {"heads", "-2"},
      {"n_q", "9223372036854775808"},
  };
  for (const auto& b : bad)
    expect_format_error(crafted([&](json& h) { set_meta(h, b.key, b.value); }), fmt::format("'{}'", b.key),
                        fmt::format("{} = '{}'", b.key, b.value));
  expect_format_error(crafted([](json& h) { h["__metadata__"]["step"] = 3; }), "'step'", "step as a number");
  const Case c = decode_mask_file(crafted([](json& h) { set_meta(h, "seed", "18446744073709551615"); }));
  EXPECT_EQ(c.meta.seed, 18446744073709551615u);
}

// Wrong JSON types of the tensor entry are format errors naming the field (were nlohmann type_errors).
TEST(MaskFileErrors, TensorEntryTypesChecked) {
  expect_format_error(crafted([](json& h) { h["mask"]["shape"] = "abc"; }), "'shape'", "shape as a string");
  expect_format_error(crafted([](json& h) { h["mask"]["shape"] = {1, 2, 3}; }), "'shape'", "shape of rank 3");
  expect_format_error(crafted([](json& h) { h["mask"]["shape"][1] = 999; }), "'shape'", "shape disagrees");
  expect_format_error(crafted([](json& h) { h["mask"] = 5; }), "'mask'", "mask as a number");
  expect_format_error(crafted([](json& h) { h["mask"]["dtype"] = 7; }), "'dtype'", "dtype as a number");
  expect_format_error(crafted([](json& h) { h["mask"].erase("data_offsets"); }), "'data_offsets'", "no offsets");
  expect_format_error(join(json::array({1, 2, 3}), {}), "header", "header as an array");
}

// read_mask_file names the path as the argument of every format error, and says why a file cannot be opened.
TEST(MaskFileErrors, ReadNamesThePathAndTheReason) {
  const auto path = tessera::testing::unique_temp_path("tessera_mask_file_errors", ".safetensors").string();
  {
    const auto bytes = crafted([](json& h) { set_meta(h, "seed", "abc"); });
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  try {
    read_mask_file(path);
    ADD_FAILURE() << "bad seed accepted";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.argument(), path);
    EXPECT_EQ(e.code(), tessera::ErrorCode::kFormatError);
    EXPECT_NE(e.message().find("'seed'"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
  try {
    read_mask_file(path);
    ADD_FAILURE() << "a missing file was read";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.argument(), path);
    EXPECT_EQ(e.code(), tessera::ErrorCode::kIoError);
    EXPECT_NE(e.message().find("No such file or directory"), std::string::npos) << e.what();
  }
}

// Metadata that disagrees with itself or with the tensor (found by a fresh-user test: all were accepted).
TEST(MaskFileErrors, InconsistentMetadataAndTrailingBytesAreRejected) {
  auto good = good_file();
  auto trailing = good;
  trailing.push_back(0);
  expect_format_error(trailing, "follow the tensor", "a byte after the tensor");
  expect_format_error(crafted([](json& h) { set_meta(h, "split", "bogus"); }), "split", "split 'bogus'");
  expect_format_error(crafted([](json& h) { set_meta(h, "family", ""); }), "family", "empty family");
  expect_format_error(crafted([](json& h) { set_meta(h, "head_ids", "1,2,3"); }), "head_ids",
                      "three head ids for one head");
  expect_format_error(crafted([](json& h) { set_meta(h, "head_ids", "1,,2"); }), "head_ids", "an empty head id");
  expect_format_error(crafted([](json& h) { set_meta(h, "head_ids", "-1"); }), "head_ids", "a negative head id");
  expect_format_error(crafted([](json& h) {
                        const auto n = std::stoll(h["__metadata__"]["n_q"].get<std::string>());
                        const auto kv = std::stoll(h["__metadata__"]["n_kv"].get<std::string>());
                        set_meta(h, "tokens_real", std::to_string(std::max(n, kv) + 1));
                      }),
                      "tokens_real", "tokens_real beyond the sequence");
  expect_format_error(crafted([](json& h) { set_meta(h, "heads", "0"); }), "heads", "zero heads");
}
