// The fp32 GPU reference against the float64 CPU reference on fresh random cases: outputs poisoned (NaN) before
// each run, every element of the O view and of LSE checked written, storage outside the O view checked untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "attention_case.hpp"
#include "device_tensor.hpp"
#include "gpu_test_util.hpp"
#include "tessera/error.hpp"
#include "tessera/reference.hpp"

namespace tessera::testing {
namespace {

/// Device copies of one case plus poisoned outputs.
struct GpuRun {
  DeviceTensor q, k, v, o, lse;
  DeviceMaskState mask;
  AttentionTensor o_host;  // layout/padding of the O storage; its storage holds the downloaded result
  HostTensor lse_host;
  bool want_lse = true;

  GpuRun(AttentionCase& c, DType out_dtype, Layout o_layout, bool with_lse)
      : want_lse(with_lse) {
    const CaseConfig& g = c.cfg;
    q = upload(c.q.storage);
    k = upload(c.k.storage);
    v = upload(c.v.storage);
    o_host = AttentionTensor(out_dtype, o_layout, g.B, g.n_q, g.heads_q, g.head_dim, 3, 8);  // NaN padding
    o = upload(o_host.storage);
    lse_host = HostTensor(DType::kFloat32, {g.B, g.heads_q, g.n_q});
    lse_host.poison();
    lse = upload(lse_host);
    mask = upload_mask_state(c.state);
  }
  AttentionRequest request(AttentionCase& c) const {
    AttentionRequest r;
    r.q = c.q.view_at(q.data(), Device::kCuda);
    r.k = c.k.view_at(k.data(), Device::kCuda);
    r.v = c.v.view_at(v.data(), Device::kCuda);
    r.o = o_host.view_at(o.data(), Device::kCuda);
    if (want_lse) r.lse = lse.view();
    r.geometry = {c.cfg.block_q, c.cfg.block_kv};
    r.scale = c.cfg.scale;
    r.mask = device_csr_mask(mask);
    return r;
  }
  /// Downloads O and LSE; returns them as a ReferenceOutput (LSE empty when not requested).
  ReferenceOutput fetch() {
    o_host.storage = download(o);
    ReferenceOutput out;
    out.o = o_host.values();
    if (want_lse) {
      lse_host = download(lse);
      for (std::int64_t i = 0; i < lse_host.numel(); ++i) out.lse.push_back(lse_host.get(i));
    }
    return out;
  }
};

/// Runs the GPU reference on a case and checks it against the CPU reference within `tol` relative L2.
void check_case(AttentionCase& c, DType out_dtype, Layout o_layout, bool with_lse, double tol) {
  const ReferenceOutput ref = reference_attention_cpu(c.request(), c.state);
  GpuRun run(c, out_dtype, o_layout, with_lse);
  reference_attention_gpu(run.request(c), run.mask, nullptr);
  device_sync();
  const ReferenceOutput got = run.fetch();
  EXPECT_EQ(run.o_host.padding_written(), 0) << "O written outside its view";
  ASSERT_EQ(got.o.size(), ref.o.size());
  std::int64_t nan = 0;
  for (double x : got.o) nan += std::isnan(x) ? 1 : 0;
  ASSERT_EQ(nan, 0) << "O elements left unwritten (NaN)";
  EXPECT_LE(relative_l2(got.o.data(), ref.o.data(), static_cast<std::int64_t>(ref.o.size())), tol);
  if (with_lse) {
    expect_lse_close(got.lse, ref.lse, tol);
  } else {
    for (std::int64_t i = 0; i < run.lse_host.numel(); ++i) ASSERT_TRUE(std::isnan(run.lse_host.get(i)));
  }
}

TEST(ReferenceAttentionGpu, RandomFp32CasesMatchCpu) {
  TESSERA_REQUIRE_GPU();
  for (int n = 0; n < 36; ++n) {
    const std::uint64_t seed = fresh_seed();
    std::mt19937_64 g(seed);
    const CaseConfig cfg = random_config(g, {DType::kFloat32}, 260, {8, 16, 32, 64, 96, 128, 256});
    const Layout o_layout = g() % 2 ? Layout::kBhsd : Layout::kBshd;
    const bool with_lse = g() % 4 != 0;
    SCOPED_TRACE("seed " + std::to_string(seed) + ": " + cfg.describe() + " o=" + layout_name(o_layout) +
                 (with_lse ? " lse" : " no-lse"));
    AttentionCase c(cfg, seed);
    check_case(c, DType::kFloat32, o_layout, with_lse, 1e-5);
  }
}

TEST(ReferenceAttentionGpu, RandomHalfInputCasesMatchCpu) {
  TESSERA_REQUIRE_GPU();
  for (int n = 0; n < 16; ++n) {
    const std::uint64_t seed = fresh_seed();
    std::mt19937_64 g(seed);
    const CaseConfig cfg = random_config(g, {DType::kBFloat16, DType::kFloat16}, 200, {16, 64, 128});
    SCOPED_TRACE("seed " + std::to_string(seed) + ": " + cfg.describe());
    AttentionCase c(cfg, seed);
    check_case(c, DType::kFloat32, Layout::kBshd, true, 1e-5);  // both compute on the same 16-bit values
  }
}

// Long rows (many kv tiles: online-softmax rescaling), big and ragged blocks, every query tile size.
TEST(ReferenceAttentionGpu, LongRowsAndLargeBlocksMatchCpu) {
  TESSERA_REQUIRE_GPU();
  struct Shape {
    int bq, bkv;
    std::int64_t n_q, n_kv, d;
  };
  for (const Shape s : {Shape{64, 64, 300, 2000, 128}, Shape{1024, 1024, 1100, 1500, 64}, Shape{16, 384, 200, 1700, 96},
                        Shape{48, 16, 150, 1234, 128}, Shape{128, 80, 260, 999, 256}}) {
    const std::uint64_t seed = fresh_seed();
    CaseConfig cfg;
    cfg.B = 1;
    cfg.heads_q = 2;
    cfg.heads_kv = 1;
    cfg.mask_heads = 2;
    cfg.block_q = s.bq;
    cfg.block_kv = s.bkv;
    cfg.n_q = s.n_q;
    cfg.n_kv = s.n_kv;
    cfg.head_dim = s.d;
    cfg.density = 0.7;
    cfg.empty_rows = 0.1;
    cfg.layout_k = Layout::kBhsd;
    SCOPED_TRACE("seed " + std::to_string(seed) + ": " + cfg.describe());
    AttentionCase c(cfg, seed);
    check_case(c, DType::kFloat32, Layout::kBshd, true, 1e-5);
  }
}

// Scores far from 0 (up to ~100: exp would overflow fp32 without the running max): the online softmax must stay
// stable. The tolerance is wider because fp32 score errors scale with |scores| (about 1e-5 absolute here).
TEST(ReferenceAttentionGpu, LargeScoresStayStable) {
  TESSERA_REQUIRE_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  CaseConfig cfg;
  cfg.n_q = 100;
  cfg.n_kv = 700;
  cfg.head_dim = 64;
  cfg.scale = 4.0f;
  cfg.density = 0.8;
  AttentionCase c(cfg, seed);
  check_case(c, DType::kFloat32, Layout::kBshd, true, 1e-4);
}

TEST(ReferenceAttentionGpu, HalfOutputsAreRoundedResults) {
  TESSERA_REQUIRE_GPU();
  for (DType out : {DType::kBFloat16, DType::kFloat16}) {
    const std::uint64_t seed = fresh_seed();
    std::mt19937_64 g(seed);
    const CaseConfig cfg = random_config(g, {DType::kBFloat16}, 200, {64, 128});
    SCOPED_TRACE("seed " + std::to_string(seed) + ": " + cfg.describe() + " out " + std::string(dtype_name(out)));
    AttentionCase c(cfg, seed);
    // One rounding of each output element: relative error <= 2^-8 (bf16) or 2^-11 (fp16) per element.
    check_case(c, out, Layout::kBhsd, true, out == DType::kBFloat16 ? 4.5e-3 : 6e-4);
  }
}

TEST(ReferenceAttentionGpu, EmptyMaskWritesZerosAndMinusInf) {
  TESSERA_REQUIRE_GPU();
  CaseConfig cfg;
  cfg.B = 2;
  cfg.heads_q = 2;
  cfg.n_q = 70;
  cfg.n_kv = 50;
  cfg.head_dim = 32;
  AttentionCase c(cfg, fresh_seed());
  c.set_mask(DenseBlockMask(cfg.mask_shape()));  // nnz = 0
  GpuRun run(c, DType::kFloat32, Layout::kBshd, true);
  reference_attention_gpu(run.request(c), run.mask, nullptr);
  device_sync();
  const ReferenceOutput got = run.fetch();
  for (double x : got.o) ASSERT_EQ(x, 0.0);
  for (double x : got.lse) ASSERT_TRUE(std::isinf(x) && x < 0);
  EXPECT_EQ(run.o_host.padding_written(), 0);
}

/// Expects reference_attention_gpu to throw an Error naming `argument` and to leave O untouched (all NaN).
void expect_error(GpuRun& run, const AttentionRequest& r, const DeviceMaskState& mask, const std::string& argument,
                  ErrorCode code = ErrorCode::kInvalidArgument) {
  try {
    reference_attention_gpu(r, mask, nullptr);
    ADD_FAILURE() << "no error, expected one naming " << argument;
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_EQ(e.code(), code) << e.what();
  }
  device_sync();
  const ReferenceOutput got = run.fetch();
  for (double x : got.o) ASSERT_TRUE(std::isnan(x)) << "O written despite the error";
}

TEST(ReferenceAttentionGpu, RejectsBadRequestsBeforeLaunch) {
  TESSERA_REQUIRE_GPU();
  CaseConfig cfg;
  cfg.heads_q = 2;
  cfg.n_q = 40;
  cfg.n_kv = 40;
  AttentionCase c(cfg, fresh_seed());
  GpuRun run(c, DType::kFloat32, Layout::kBshd, true);
  const AttentionRequest ok = run.request(c);

  AttentionRequest r = ok;
  r.o.device = Device::kCpu;
  expect_error(run, r, run.mask, "o.device");
  r = ok;
  r.q.device = Device::kCpu;
  expect_error(run, r, run.mask, "q.device");
  r = ok;
  r.lse.dtype = DType::kFloat16;
  expect_error(run, r, run.mask, "lse.dtype");
  r = ok;
  r.lse.shape[2] = 39;
  expect_error(run, r, run.mask, "lse.shape");
  r = ok;
  r.o.stride[1] = 0;  // every token would write the same row
  expect_error(run, r, run.mask, "o.stride");
  r = ok;
  r.o.dtype = DType::kFloat64;
  expect_error(run, r, run.mask, "o.dtype");
  r = ok;
  r.q.dtype = r.k.dtype = r.v.dtype = DType::kFloat64;
  expect_error(run, r, run.mask, "q.dtype");
  r = ok;
  r.q.shape[3] = r.k.shape[3] = r.v.shape[3] = r.o.shape[3] = 320;
  expect_error(run, r, run.mask, "q.shape", ErrorCode::kUnsupported);
  r = ok;
  r.geometry.block_kv = 8;
  expect_error(run, r, run.mask, "geometry.block_kv");

  DeviceMaskState small = upload_mask_state(c.state);
  small.nnz += 1;  // claims more column indices than the buffer holds
  expect_error(run, ok, small, "mask.col_indices");
  DeviceMaskState wrong = upload_mask_state(c.state);
  wrong.shape.n_kvb = 2;
  expect_error(run, ok, wrong, "mask.n_kvb");
}

}  // namespace
}  // namespace tessera::testing
