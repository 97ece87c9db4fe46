// validate_request(): invalid inputs raise a precise Error (code, argument, message fragment); valid ones pass.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "mask_gen.hpp"
#include "tessera/error.hpp"
#include "tessera/request.hpp"

namespace tessera {
namespace {

using testing::encode_csr;
using testing::encode_dense;
using testing::encode_index_lists;
using testing::HostMaskTensors;
using testing::MaskPattern;
using testing::random_mask_bits;

/// Distinct addresses 4 GiB apart for Q, K, V and O: the validator never reads tensor data, but it does compare
/// the byte extents of the outputs with the inputs' (O must not overlap Q, K or V).
void* fake_address(int i) { return reinterpret_cast<void*>((std::uintptr_t{1} << 40) + (std::uintptr_t(i) << 32)); }

/// A valid request: B=2, N_q=100, N_kv=130, H_q=4, H_kv=2, D=64, bf16, B_Q=32, B_KV=64 (ragged in both dims).
struct Fixture {
  std::int64_t B = 2, Nq = 100, Nkv = 130, Hq = 4, Hkv = 2, D = 64;
  BlockGeometry g{32, 64};
  MaskShape shape{2, 4, 4, 3};  // n_qb = ceil(100/32) = 4, n_kvb = ceil(130/64) = 3
  HostMaskTensors mask_storage;
  std::vector<float> lse_storage;
  AttentionRequest r;

  explicit Fixture(MaskFormat f = MaskFormat::kDense, MaskShape s = {2, 4, 4, 3}) : shape(s) {
    r.q = make_tensor(fake_address(0), DType::kBFloat16, Device::kCpu, {B, Nq, Hq, D});
    r.k = make_tensor(fake_address(1), DType::kBFloat16, Device::kCpu, {B, Nkv, Hkv, D});
    r.v = r.k;  // K and V may share memory (both are only read)
    r.o = make_tensor(fake_address(2), DType::kBFloat16, Device::kCpu, {B, Nq, Hq, D});
    r.geometry = g;
    std::mt19937_64 gen(7);
    auto bits = random_mask_bits(shape, MaskPattern::kRandom, 0.5, gen);
    if (f == MaskFormat::kDense) mask_storage = encode_dense(shape, bits);
    if (f == MaskFormat::kBlockCsr) mask_storage = encode_csr(shape, bits);
    if (f == MaskFormat::kIndexLists) mask_storage = encode_index_lists(shape, bits, 1, &gen);
    r.mask = mask_storage.mask;
  }
  void add_lse() {
    lse_storage.assign(static_cast<std::size_t>(B * Hq * Nq), 0.f);
    r.lse = make_tensor(lse_storage.data(), DType::kFloat32, Device::kCpu, {B, Hq, Nq});
  }
};

struct Case {
  const char* name;
  MaskFormat format;
  std::function<void(Fixture&)> mutate;
  ErrorCode code;
  const char* argument;
  const char* fragment;
  ValidateOptions options{};
};

void expect_error(const Case& c) {
  Fixture f(c.format);
  c.mutate(f);
  try {
    validate_request(f.r, c.options);
    ADD_FAILURE() << c.name << ": no error raised";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), c.code) << c.name << ": " << e.what();
    EXPECT_EQ(e.argument(), c.argument) << c.name << ": " << e.what();
    EXPECT_NE(e.message().find(c.fragment), std::string::npos)
        << c.name << ": message lacks \"" << c.fragment << "\": " << e.what();
  }
}

const std::vector<Case>& invalid_cases() {
  using E = ErrorCode;
  constexpr auto kInv = E::kInvalidArgument;
  constexpr auto kDense = MaskFormat::kDense;
  constexpr auto kCsr = MaskFormat::kBlockCsr;
  constexpr auto kList = MaskFormat::kIndexLists;
  static const std::vector<Case> cases = {
      {"q null", kDense, [](Fixture& f) { f.r.q.data = nullptr; }, kInv, "q", "null"},
      {"q rank 3", kDense, [](Fixture& f) { f.r.q.rank = 3; }, kInv, "q", "expected rank 4 [B, N, H, D], got rank 3"},
      {"k zero extent", kDense, [](Fixture& f) { f.r.k.shape[1] = 0; }, kInv, "k.shape", "extents must be positive"},
      {"k batch", kDense,
       [](Fixture& f) {
         f.r.k.shape[0] = 3;
         f.r.v.shape[0] = 3;
       },
       kInv, "k", "batch B = 3 differs from q's B = 2"},
      {"k head dim", kDense,
       [](Fixture& f) {
         f.r.k.shape[3] = 128;
         f.r.k.stride = {0, 0, 128, 1};
         f.r.k.stride[1] = 256;
         f.r.k.stride[0] = 256 * 130;
         f.r.v = f.r.k;
       },
       kInv, "k", "head_dim D = 128 differs from q's D = 64"},
      {"v shape", kDense, [](Fixture& f) { f.r.v.shape[1] = 129; }, kInv, "v",
       "differs from k's shape [2, 130, 2, 64]"},
      {"gqa", kDense,
       [](Fixture& f) {
         f.r.k.shape[2] = 3;
         f.r.v.shape[2] = 3;
       },
       kInv, "k", "H_q = 4 is not a multiple of H_kv = 3"},
      {"o shape", kDense, [](Fixture& f) { f.r.o.shape[2] = 2; }, kInv, "o", "differs from q's shape"},
      {"q dtype int", kDense, [](Fixture& f) { f.r.q.dtype = DType::kInt32; }, kInv, "q",
       "must be bf16 or f16, got i32"},
      {"q fp32 no ref", kDense,
       [](Fixture& f) { f.r.q.dtype = f.r.k.dtype = f.r.v.dtype = f.r.o.dtype = DType::kFloat32; }, E::kUnsupported,
       "q", "reference paths only"},
      {"k dtype", kDense, [](Fixture& f) { f.r.k.dtype = DType::kFloat16; }, kInv, "k",
       "dtype f16 differs from q's dtype bf16"},
      {"o dtype", kDense, [](Fixture& f) { f.r.o.dtype = DType::kFloat32; }, kInv, "o", "must equal q's dtype bf16"},
      {"head dim not contiguous", kDense, [](Fixture& f) { f.r.q.stride[3] = 2; }, kInv, "q.stride",
       "head dimension must be contiguous (stride[3] == 1)"},
      {"negative stride", kDense, [](Fixture& f) { f.r.k.stride[1] = -128; }, kInv, "k.stride",
       "stride[1] = -128 must be positive for a dimension of extent 130"},
      {"zero stride", kDense, [](Fixture& f) { f.r.o.stride[2] = 0; }, kInv, "o.stride",
       "stride[2] = 0 must be positive"},
      {"too many tokens", kDense, [](Fixture& f) { f.r.q.shape[1] = f.r.o.shape[1] = 1LL << 31; }, kInv, "q.shape",
       "exceeds the 32-bit limit"},
      {"device mismatch", kDense, [](Fixture& f) { f.r.v.device = Device::kCuda; }, kInv, "v",
       "is on cuda but q is on cpu"},
      {"head_dim 96", kDense,
       [](Fixture& f) {
         for (TensorView* t : {&f.r.q, &f.r.k, &f.r.v, &f.r.o}) {
           t->shape[3] = 96;
           t->stride[2] = 96;
           t->stride[1] = 96 * t->shape[2];
           t->stride[0] = t->stride[1] * t->shape[1];
         }
       },
       E::kUnsupported, "head_dim", "head_dim 96 is not yet supported"},
      {"head_dim 80", kDense,
       [](Fixture& f) {
         for (TensorView* t : {&f.r.q, &f.r.k, &f.r.v, &f.r.o}) {
           t->shape[3] = 80;
           t->stride[2] = 80;
           t->stride[1] = 80 * t->shape[2];
           t->stride[0] = t->stride[1] * t->shape[1];
         }
       },
       kInv, "head_dim", "head_dim 80 is not"},
      {"block_q not multiple", kDense, [](Fixture& f) { f.r.geometry.block_q = 40; }, kInv, "geometry.block_q",
       "B_Q = 40 must be a multiple of 16 in [16, 1024]"},
      {"block_kv too large", kDense, [](Fixture& f) { f.r.geometry.block_kv = 2048; }, kInv, "geometry.block_kv",
       "B_KV = 2048 must be a multiple of 16"},
      {"mask n_qb", kDense, [](Fixture& f) { f.r.geometry.block_q = 16; }, kInv, "mask.n_qb",
       "n_qb = 4 does not match ceil(N_q / B_Q) = ceil(100 / 16) = 7"},
      {"mask n_kvb", kDense, [](Fixture& f) { f.r.geometry.block_kv = 128; }, kInv, "mask.n_kvb",
       "n_kvb = 3 does not match ceil(N_kv / B_KV) = ceil(130 / 128) = 2"},
      {"mask batch", kDense, [](Fixture& f) { f.r.q.shape[0] = f.r.k.shape[0] = f.r.v.shape[0] = f.r.o.shape[0] = 3; },
       kInv, "mask.batch", "B_m = 2 must be 1 (broadcast) or B = 3"},
      {"mask heads", kDense, [](Fixture& f) { f.r.q.shape[2] = f.r.o.shape[2] = 2; }, kInv, "mask.heads",
       "H_m = 4 must be 1 (broadcast) or H_q = 2"},
      {"dense dtype", kDense, [](Fixture& f) { f.r.mask.dense.dtype = DType::kInt32; }, kInv, "mask.dense",
       "dtype must be bool or u8, got i32"},
      {"dense rank", kDense, [](Fixture& f) { f.r.mask.dense.rank = 3; }, kInv, "mask.dense", "expected rank 4"},
      {"dense shape vs extents", kDense, [](Fixture& f) { f.r.mask.dense.shape[3] = 2; }, kInv, "mask.dense",
       "does not match the mask extents"},
      {"mask device", kDense, [](Fixture& f) { f.r.mask.dense.device = Device::kCuda; }, kInv, "mask",
       "is on cuda but q is on cpu"},
      {"csr offsets length", kCsr, [](Fixture& f) { f.r.mask.row_offsets.shape[0] -= 1; }, kInv, "mask.row_offsets",
       "does not match the expected [B_m*H_m*n_qb + 1] = [33]"},
      {"csr offsets dtype", kCsr, [](Fixture& f) { f.r.mask.row_offsets.dtype = DType::kFloat32; }, kInv,
       "mask.row_offsets", "dtype must be i32, got f32"},
      {"csr offsets strided", kCsr, [](Fixture& f) { f.r.mask.row_offsets.stride[0] = 2; }, kInv, "mask.row_offsets",
       "must be contiguous"},
      {"csr first offset", kCsr, [](Fixture& f) { f.mask_storage.i32(0)[0] = 1; }, kInv, "mask.row_offsets",
       "row_offsets[0] = 1, expected 0"},
      {"csr offsets decrease", kCsr, [](Fixture& f) { f.mask_storage.i32(0)[5] = f.mask_storage.i32(0)[4] - 1; }, kInv,
       "mask.row_offsets", "is less than row_offsets[4]"},
      {"csr last offset", kCsr, [](Fixture& f) { f.r.mask.col_indices.shape[0] -= 1; }, kInv, "mask.row_offsets",
       "does not equal nnz"},
      {"csr col range", kCsr, [](Fixture& f) { f.mask_storage.i32(1)[0] = 3; }, kInv, "mask.col_indices",
       "col_indices[0] = 3 in row "},
      {"csr col order", kCsr,
       [](Fixture& f) {
         // Find a row with >= 2 columns and swap its first two.
         auto* off = f.mask_storage.i32(0);
         auto* col = f.mask_storage.i32(1);
         for (int r = 0; r < 32; ++r)
           if (off[r + 1] - off[r] >= 2) {
             std::swap(col[off[r]], col[off[r] + 1]);
             break;
           }
       },
       kInv, "mask.col_indices", "is not greater than col_indices["},
      {"lists counts shape", kList, [](Fixture& f) { f.r.mask.counts.shape[2] = 3; }, kInv, "mask.counts",
       "does not match the expected [B_m, H_m, n_qb]"},
      {"lists indices rank", kList, [](Fixture& f) { f.r.mask.indices.rank = 3; }, kInv, "mask.indices",
       "expected rank 4"},
      {"lists count range", kList, [](Fixture& f) { f.mask_storage.i32(0)[7] = 99; }, kInv, "mask.counts",
       "counts of row 7 (b_m = 0, h_m = 1, qb = 3) = 99 is outside [0, K_max ="},
      {"lists negative count", kList, [](Fixture& f) { f.mask_storage.i32(0)[0] = -1; }, kInv, "mask.counts",
       "= -1 is outside"},
      {"lists index range", kList,
       [](Fixture& f) {
         auto* cnt = f.mask_storage.i32(0);
         cnt[2] = std::max(cnt[2], 1);
         f.mask_storage.i32(1)[2 * f.r.mask.indices.shape[3]] = -5;
       },
       kInv, "mask.indices", "indices[0] = -5 of row 2"},
      {"lists duplicate", kList,
       [](Fixture& f) {
         auto* cnt = f.mask_storage.i32(0);
         auto* idx = f.mask_storage.i32(1);
         cnt[3] = 2;
         idx[3 * f.r.mask.indices.shape[3]] = 1;
         idx[3 * f.r.mask.indices.shape[3] + 1] = 1;
       },
       kInv, "mask.indices", "indices[1] = 1 of row 3 (b_m = 0, h_m = 0, qb = 3) duplicates indices[0]"},
      {"lse dtype", kDense,
       [](Fixture& f) {
         f.add_lse();
         f.r.lse.dtype = DType::kFloat16;
       },
       kInv, "lse", "dtype must be f32, got f16"},
      {"lse shape", kDense,
       [](Fixture& f) {
         f.add_lse();
         f.r.lse.shape[2] = 99;
       },
       kInv, "lse", "does not match [B, H_q, N_q] = [2, 4, 100]"},
      {"lse device", kDense,
       [](Fixture& f) {
         f.add_lse();
         f.r.lse.device = Device::kCuda;
       },
       kInv, "lse", "is on cuda but q is on cpu"},
      {"o is q", kDense, [](Fixture& f) { f.r.o.data = f.r.q.data; }, kInv, "o", "memory overlaps q's"},
      {"o is k (and v)", kDense, [](Fixture& f) { f.r.o.data = f.r.v.data; }, kInv, "o", "memory overlaps k's"},
      {"o is v only", kDense,
       [](Fixture& f) {
         f.r.v.data = fake_address(3);
         f.r.o.data = f.r.v.data;
       },
       kInv, "o", "memory overlaps v's"},
      {"o ends on q's first byte", kDense,
       [](Fixture& f) {  // O's last element (2 bytes) covers q's first byte
         const std::int64_t o_bytes = f.r.q.numel() * 2;
         f.r.o.data = static_cast<char*>(f.r.q.data) - o_bytes + 1;
       },
       kInv, "o", "memory overlaps q's"},
      {"o inside strided q", kDense,
       [](Fixture& f) {  // q with a gap between batches: O in the gap still intersects q's extent (conservative)
         f.r.q.stride[0] = f.r.q.stride[0] * 4;
         // 102400 bytes in: O (102400 bytes) lies between q's batch 0 (bytes [0, 51200)) and batch 1 ([204800, ...))
         f.r.o.data = static_cast<char*>(f.r.q.data) + f.r.q.stride[0];
       },
       kInv, "o", "memory overlaps q's"},
      {"lse in q", kDense,
       [](Fixture& f) {
         f.add_lse();
         f.r.lse.data = static_cast<char*>(f.r.q.data) + 64;
       },
       kInv, "lse", "memory overlaps q's"},
      {"lse in o", kDense,
       [](Fixture& f) {
         f.add_lse();
         f.r.lse.data = f.r.o.data;
       },
       kInv, "lse", "memory overlaps o's"},
  };
  return cases;
}

TEST(ValidateRequest, InvalidInputsRaisePreciseErrors) {
  EXPECT_GE(invalid_cases().size(), 20u);
  for (const Case& c : invalid_cases()) expect_error(c);
}

TEST(ValidateRequest, ValidFixtureAccepted) {
  for (MaskFormat f : {MaskFormat::kDense, MaskFormat::kBlockCsr, MaskFormat::kIndexLists}) {
    Fixture fx(f);
    fx.add_lse();
    const ProblemShape p = validate_request(fx.r);
    EXPECT_EQ(p.batch, 2);
    EXPECT_EQ(p.n_q, 100);
    EXPECT_EQ(p.n_kv, 130);
    EXPECT_EQ(p.heads_q, 4);
    EXPECT_EQ(p.heads_kv, 2);
    EXPECT_EQ(p.head_dim, 64);
    EXPECT_EQ(p.n_qb, 4);
    EXPECT_EQ(p.n_kvb, 3);
  }
}

TEST(ValidateRequest, BhsdStridesAccepted) {
  Fixture fx;
  // BHSD memory: [B, H, N, D] storage viewed as [B, N, H, D].
  fx.r.q = make_strided_tensor(fake_address(0), DType::kBFloat16, Device::kCpu, {2, 100, 4, 64},
                               {4 * 100 * 64, 64, 100 * 64, 1});
  fx.r.o = fx.r.q;
  fx.r.o.data = fake_address(2);
  fx.r.k = make_strided_tensor(fake_address(1), DType::kBFloat16, Device::kCpu, {2, 130, 2, 64},
                               {2 * 130 * 64, 64, 130 * 64, 1});
  fx.r.v = fx.r.k;
  EXPECT_NO_THROW(validate_request(fx.r));
}

// Outputs right next to their inputs (touching, not intersecting) and inputs sharing memory are accepted; tensors on
// different devices are never compared.
TEST(ValidateRequest, AdjacentOutputsAndSharedInputsAccepted) {
  Fixture fx;
  fx.add_lse();
  const std::int64_t q_bytes = fx.r.q.numel() * 2;
  fx.r.o.data = static_cast<char*>(fx.r.q.data) + q_bytes;  // O starts one byte after q's last byte
  EXPECT_NO_THROW(validate_request(fx.r));
  fx.r.o.data = static_cast<char*>(fx.r.q.data) - q_bytes;  // O ends one byte before q's first
  EXPECT_NO_THROW(validate_request(fx.r));
  fx.r.k.data = fx.r.v.data = fx.r.q.data = fake_address(1);  // q, k and v all alias: only read
  fx.r.o.data = fake_address(2);
  EXPECT_NO_THROW(validate_request(fx.r));
  // A q view that exactly fills the memory before O (last element ends at O's first byte - 1).
  fx.r.o.data = static_cast<char*>(fx.r.q.data) + q_bytes - 1;
  EXPECT_THROW(validate_request(fx.r), Error);
}

TEST(ValidateRequest, MqaBroadcastMasksAndReferenceDtypesAccepted) {
  for (MaskFormat f : {MaskFormat::kDense, MaskFormat::kBlockCsr, MaskFormat::kIndexLists}) {
    for (MaskShape s : {MaskShape{1, 1, 4, 3}, MaskShape{2, 1, 4, 3}, MaskShape{1, 4, 4, 3}}) {
      Fixture fx(f, s);
      fx.r.k.shape[2] = fx.r.v.shape[2] = 1;  // MQA
      EXPECT_NO_THROW(validate_request(fx.r)) << mask_format_name(f);
      fx.r.q.dtype = fx.r.k.dtype = fx.r.v.dtype = DType::kFloat64;
      fx.r.o.dtype = DType::kFloat32;
      ValidateOptions ref;
      ref.allow_reference_dtypes = true;
      EXPECT_NO_THROW(validate_request(fx.r, ref));
    }
  }
}

TEST(ValidateRequest, HostContentCheckCanBeSkipped) {
  Fixture fx(MaskFormat::kBlockCsr);
  fx.mask_storage.i32(1)[0] = 99;  // out of range column
  ValidateOptions no_contents;
  no_contents.check_host_mask_contents = false;
  EXPECT_NO_THROW(validate_request(fx.r, no_contents));
  EXPECT_THROW(validate_request(fx.r), Error);
}

TEST(ValidateRequest, RaggedExactMultipleAndDegenerateSizesAccepted) {
  // N a multiple of the block size, and N smaller than one block.
  for (std::int64_t nq : {1, 31, 32, 64, 100}) {
    Fixture fx(MaskFormat::kDense, MaskShape{2, 4, (nq + 31) / 32, 3});
    fx.r.q.shape[1] = fx.r.o.shape[1] = nq;
    EXPECT_NO_THROW(validate_request(fx.r)) << nq;
  }
}

}  // namespace
}  // namespace tessera
