// GPU tests of the attention kernel families (mma.sync and wgmma; the suite keeps its first name, MmaAttention):
// every compiled catalog entry x mapping (Direct, Coarsened-Q span,
// Coarsened-KV span, packed KV, Coarsened-Q + packed, Refined, split-KV + merge) x mask kind, against a
// float64 reference computed here, on fresh random inputs, outputs poisoned before each run.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "host_tensor.hpp"
#include "core/arch_limits.hpp"
#include "core/catalog.hpp"
#include "kernel_runner.hpp"
#include "kernels/launch.hpp"
#include "tessera/error.hpp"

namespace tessera::kernels {
// Prints a test parameter as its entry name: CTest test names (gtest_discover_tests appends "# GetParam() = ...")
// then stay the same from build to build instead of embedding the struct's bytes, pointers included.
void PrintTo(const CompiledEntry& e, std::ostream* os) { *os << e.name; }
}  // namespace tessera::kernels

namespace tessera::testing {
namespace {

using kernels::CompiledEntry;

struct Problem {
  int batch, n_q, n_kv, h_q, h_kv, d, bq, bkv;
  bool bhsd;  // Q/K/V/O stored [B, H, N, D] (strided) instead of [B, N, H, D]
};

struct Strides { std::int64_t b, n, h; };
Strides strides_of(const Problem& pr, int n, int h) {
  return pr.bhsd ? Strides{std::int64_t(h) * n * pr.d, pr.d, std::int64_t(n) * pr.d}
                 : Strides{std::int64_t(n) * h * pr.d, std::int64_t(h) * pr.d, pr.d};
}

/// float64 reference: O[b, i, h, :] and LSE[b, h, i] of E(M).
void reference(const Problem& pr, const BlockMask& m, const HostTensor& q, const HostTensor& k, const HostTensor& v,
               std::vector<double>& o, std::vector<double>& lse) {
  const Strides sq = strides_of(pr, pr.n_q, pr.h_q), sk = strides_of(pr, pr.n_kv, pr.h_kv);
  o.assign(std::size_t(pr.batch) * pr.n_q * pr.h_q * pr.d, 0.0);
  lse.assign(std::size_t(pr.batch) * pr.h_q * pr.n_q, -std::numeric_limits<double>::infinity());
  const double scale = 1.0 / std::sqrt(double(pr.d));
  std::vector<double> s(pr.n_kv), acc(pr.d), qd(q.numel()), kd(k.numel()), vd(v.numel());
  for (std::int64_t i = 0; i < q.numel(); ++i) qd[i] = q.get(i);
  for (std::int64_t i = 0; i < k.numel(); ++i) kd[i] = k.get(i), vd[i] = v.get(i);
  for (int b = 0; b < pr.batch; ++b)
    for (int h = 0; h < pr.h_q; ++h) {
      const int hk = h / (pr.h_q / pr.h_kv);
      for (int i = 0; i < pr.n_q; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < pr.n_kv; ++j) {
          s[j] = -std::numeric_limits<double>::infinity();
          if (!m.at(b, h, i / pr.bq, j / pr.bkv)) continue;
          double dot = 0;
          for (int c = 0; c < pr.d; ++c)
            dot += qd[b * sq.b + i * sq.n + h * sq.h + c] * kd[b * sk.b + j * sk.n + hk * sk.h + c];
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        if (mx == -std::numeric_limits<double>::infinity()) continue;
        double sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int j = 0; j < pr.n_kv; ++j) {
          if (s[j] == -std::numeric_limits<double>::infinity()) continue;
          const double p = std::exp(s[j] - mx);
          sum += p;
          for (int c = 0; c < pr.d; ++c) acc[c] += p * vd[b * sk.b + j * sk.n + hk * sk.h + c];
        }
        for (int c = 0; c < pr.d; ++c) o[((std::size_t(b) * pr.n_q + i) * pr.h_q + h) * pr.d + c] = acc[c] / sum;
        lse[(std::size_t(b) * pr.h_q + h) * pr.n_q + i] = mx + std::log(sum);
      }
    }
}

struct Case {
  std::string label;
  Problem pr;
  MappingSpec spec;
  MaskKind kind;
};

/// Checks O and LSE of one run of case `c` against the float64 reference.
void check_outputs(const CompiledEntry& e, const Case& c, const HostTensor& o, const HostTensor& lse,
                   const std::vector<double>& o_ref, const std::vector<double>& lse_ref) {
  const Problem& pr = c.pr;
  const Strides sq = strides_of(pr, pr.n_q, pr.h_q);
  // O in logical [B, N, H, D] order (the test tensors are stored per `bhsd`).
  std::vector<double> o_got(o_ref.size());
  for (int b = 0; b < pr.batch; ++b)
    for (int i = 0; i < pr.n_q; ++i)
      for (int h = 0; h < pr.h_q; ++h)
        for (int d = 0; d < pr.d; ++d)
          o_got[((std::size_t(b) * pr.n_q + i) * pr.h_q + h) * pr.d + d] = o.get(b * sq.b + i * sq.n + h * sq.h + d);
  const double tol = e.dtype == DType::kBFloat16 ? 1e-2 : 5e-3;
  const double err = relative_l2(o_got.data(), o_ref.data(), std::int64_t(o_ref.size()));
  if (c.kind == MaskKind::kEmpty) {
    for (double x : o_got) ASSERT_EQ(x, 0.0) << "empty mask must give O = 0";
  } else {
    EXPECT_LE(err, tol) << "relative L2 of O";
  }
  // LSE: exact -inf where the reference is -inf, else close (absolute 2e-2 on natural-log values).
  int bad = 0;
  for (std::size_t i = 0; i < lse_ref.size(); ++i) {
    const double g = lse.get(std::int64_t(i)), r = lse_ref[i];
    const bool ok = std::isinf(r) ? (std::isinf(g) && g < 0) : (std::isfinite(g) && std::abs(g - r) <= 2e-2);
    if (!ok && bad++ < 3) ADD_FAILURE() << "LSE[" << i << "] = " << g << ", reference " << r;
  }
  EXPECT_EQ(bad, 0) << "LSE mismatches";
  // Empty rows: O exactly 0.
  for (std::size_t i = 0; i < o_ref.size(); ++i) {
    if (o_ref[i] == 0.0 && std::isinf(lse_ref[(i / pr.d / pr.h_q / pr.n_q) * pr.h_q * pr.n_q +
                                              ((i / pr.d) % pr.h_q) * pr.n_q + (i / pr.d / pr.h_q) % pr.n_q])) {
      ASSERT_EQ(o_got[i], 0.0) << "empty row must give O = 0 at " << i;
    }
  }
}

/// How a case is launched: one CTA per item, or persistent CTAs (at most max_ctas of them; 0: as many as fit).
struct Launch {
  bool persistent = false;
  int max_ctas = 0;
};

/// The launches every case runs on entry `e`: one CTA per item; on entries with persistent CTAs also persistent with
/// 2 and 3 CTAs (each runs many items, its producer an item ahead of its consumers; 3 does not divide the item counts)
/// and with as many as fit (usually more than the cases' items: the launcher's occupancy path).
std::vector<Launch> launches_for(const CompiledEntry& e) {
  if (!e.persistent_ctas) return {Launch{}};
  return {Launch{}, Launch{true, 2}, Launch{true, 3}, Launch{true, 0}};
}

/// Runs one case on `entry` (each of `launches`, outputs and partials poisoned before each) and checks O and LSE
/// against the float64 reference.
void check_case(const CompiledEntry& e, const Case& c, std::uint64_t seed, const std::vector<Launch>& launches) {
  SCOPED_TRACE(std::string(e.name) + " / " + c.label);
  const Problem& pr = c.pr;
  const int n_qb = (pr.n_q + pr.bq - 1) / pr.bq, n_kvb = (pr.n_kv + pr.bkv - 1) / pr.bkv;
  const BlockMask m = make_mask(pr.batch, pr.h_q, n_qb, n_kvb, c.kind, 0.35, seed);
  const HostPlan plan = build_plan(m, pr.n_q, pr.n_kv, pr.bq, pr.bkv, c.spec);
  HostTensor q(e.dtype, {pr.batch, pr.n_q, pr.h_q, pr.d}), k(e.dtype, {pr.batch, pr.n_kv, pr.h_kv, pr.d}),
      v(e.dtype, {pr.batch, pr.n_kv, pr.h_kv, pr.d}), o(e.dtype, {pr.batch, pr.n_q, pr.h_q, pr.d}),
      lse(DType::kFloat32, {pr.batch, pr.h_q, pr.n_q});
  q.fill_normal(seed * 3 + 1), k.fill_normal(seed * 3 + 2), v.fill_normal(seed * 3 + 3);
  std::vector<double> o_ref, lse_ref;
  reference(pr, m, q, k, v, o_ref, lse_ref);

  auto dq = upload(q.bytes), dk = upload(k.bytes), dv = upload(v.bytes), dO = upload(o.bytes), dl = upload(lse.bytes);
  DevicePlan dp(plan, c.spec.tile_q, pr.d);
  kernels::AttentionParams prm;
  prm.dtype = e.dtype;
  prm.q = dq.data(), prm.k = dk.data(), prm.v = dv.data(), prm.o = dO.data(), prm.lse = dl.as<float>();
  const Strides sq = strides_of(pr, pr.n_q, pr.h_q), sk = strides_of(pr, pr.n_kv, pr.h_kv);
  prm.q_stride_b = sq.b, prm.q_stride_n = sq.n, prm.q_stride_h = sq.h;
  prm.o_stride_b = sq.b, prm.o_stride_n = sq.n, prm.o_stride_h = sq.h;
  prm.k_stride_b = sk.b, prm.k_stride_n = sk.n, prm.k_stride_h = sk.h;
  prm.v_stride_b = sk.b, prm.v_stride_n = sk.n, prm.v_stride_h = sk.h;
  prm.lse_stride_b = std::int64_t(pr.h_q) * pr.n_q, prm.lse_stride_h = pr.n_q;
  prm.batch = pr.batch, prm.n_q = pr.n_q, prm.n_kv = pr.n_kv, prm.h_q = pr.h_q, prm.h_kv = pr.h_kv;
  prm.head_dim = pr.d, prm.block_q = pr.bq, prm.block_kv = pr.bkv;
  prm.scale = static_cast<float>(1.0 / std::sqrt(double(pr.d)));

  for (const Launch& l : launches) {
    SCOPED_TRACE(l.persistent ? "persistent CTAs, max_ctas " + std::to_string(l.max_ctas) : "one CTA per item");
    o.poison(), lse.poison();
    TESSERA_CUDA_CHECK(cudaMemcpy(dO.data(), o.bytes.data(), o.bytes.size(), cudaMemcpyHostToDevice));
    TESSERA_CUDA_CHECK(cudaMemcpy(dl.data(), lse.bytes.data(), lse.bytes.size(), cudaMemcpyHostToDevice));
    dp.poison_partials();
    dp.poison_counter();
    dp.set_persistent(l.persistent);
    prm.max_ctas = l.max_ctas;
    run_plan(std::string(e.name), c.spec.packed, c.spec.membership, dp, prm);
    TESSERA_CUDA_CHECK(cudaDeviceSynchronize());
    TESSERA_CUDA_CHECK(cudaMemcpy(o.bytes.data(), dO.data(), o.bytes.size(), cudaMemcpyDeviceToHost));
    TESSERA_CUDA_CHECK(cudaMemcpy(lse.bytes.data(), dl.data(), lse.bytes.size(), cudaMemcpyDeviceToHost));
    if (l.persistent) {  // cleared by the launcher, then one ticket per item run (scheduler.cuh)
      EXPECT_EQ(dp.counter(), plan.items.size()) << "tickets taken";
    }
    check_outputs(e, c, o, lse, o_ref, lse_ref);
  }
}

/// Full kv tiles of the halves cases (plus a ragged one): 25 x 64 + 23 tokens give 26 blocks of 64, the last one
/// (kb = 25, 25 % 7 != 3) foreign to the even query block, so the list ends in a run the first warpgroup skips.
constexpr int kHalvesKvBlocks = 25;

/// The cases run on entry `e`: each mapping the entry can realize, with ragged sizes, GQA and both layouts.
std::vector<Case> cases_for(const CompiledEntry& e) {
  const int tq = e.tile_q, tkv = e.tile_kv, d = e.head_dim;
  std::vector<Case> cs;
  auto add = [&](std::string label, int bq, int bkv, MappingSpec spec, MaskKind kind, bool bhsd, int batch) {
    const int n_q = 3 * std::max(tq, bq) + 37 - (37 % 8 == 0 ? 0 : 0), n_kv = 5 * std::max(tkv, bkv) + 23;
    cs.push_back({label, Problem{batch, n_q, n_kv, 4, 2, d, bq, bkv, bhsd}, spec, kind});
  };
  MappingSpec direct{tq, tkv, false, false, 1};
  add("direct/random", tq, tkv, direct, MaskKind::kRandom, false, 1);
  add("direct/band", tq, tkv, direct, MaskKind::kBandRandom, true, 2);
  add("direct/empty_rows", tq, tkv, direct, MaskKind::kEmptyRows, false, 1);
  add("direct/dense", tq, tkv, direct, MaskKind::kDense, false, 1);
  add("direct/empty", tq, tkv, direct, MaskKind::kEmpty, false, 1);
  add("refined/random", 2 * tq, 2 * tkv, direct, MaskKind::kRandom, false, 1);
  MappingSpec split{tq, tkv, false, false, 3};
  add("split3/empty_rows", tq, tkv, split, MaskKind::kEmptyRows, false, 1);
  add("split3/band", tq, tkv, split, MaskKind::kBandRandom, true, 1);
  MappingSpec masked{tq, tkv, false, true, 1};
  add("direct_masked/random", tq, tkv, masked, MaskKind::kRandom, false, 1);
  if (tq >= 32) add("coarsened_q2/empty_rows", tq / 2, tkv, masked, MaskKind::kEmptyRows, true, 1);
  if (tq >= 64) add("coarsened_q4/random", tq / 4, tkv, masked, MaskKind::kRandom, false, 1);
  if (tkv >= 32) add("coarsened_kv2/random", tq, tkv / 2, masked, MaskKind::kRandom, false, 1);
  // Coarsened-KV by 4: with a kv-split warp layout (W > T_Q / 16) a warp's column slice is often entirely
  // masked while another warp's is not; the epilogue merge must weigh such -inf states by zero.
  if (tkv >= 64) add("coarsened_kv4/random", tq, tkv / 4, masked, MaskKind::kRandom, false, 1);
  if (tq >= 32 && tkv >= 32) add("coarsened_q2kv2/band", tq / 2, tkv / 2, masked, MaskKind::kBandRandom, false, 2);
  // Coarsened-Q where the tile's two consumer warpgroups hold different query blocks that share few kv blocks: on
  // the two-warpgroup T_KV = 64 tiles each skips runs of the other's entries longer than the ring's stages, at the
  // start, the middle and the end of the list (consumer_skip.cuh; the premise is checked by
  // MmaAttentionMasks.HalvesGiveLongForeignRunsAtStartMiddleAndEnd).
  if (tq >= 64) {
    cs.push_back({"coarsened_q2/halves", Problem{1, 3 * tq + 37, kHalvesKvBlocks * tkv + 23, 4, 2, d, tq / 2, tkv, false},
                  masked, MaskKind::kHalves});
    cs.push_back({"packed2_coarsened_q2/halves",
                  Problem{1, 3 * tq + 37, kHalvesKvBlocks * tkv + 23, 4, 2, d, tq / 2, tkv / 2, true},
                  MappingSpec{tq, tkv, true, true, 1}, MaskKind::kHalves});
  }
  MappingSpec packed{tq, tkv, true, true, 1};
  add("packed1/random", tq, tkv, packed, MaskKind::kRandom, false, 1);
  if (tkv >= 32) add("packed2/random", tq, tkv / 2, packed, MaskKind::kRandom, true, 1);
  if (tkv >= 64) add("packed4/empty_rows", tq, tkv / 4, packed, MaskKind::kEmptyRows, false, 1);
  if (tkv >= 32 && tq >= 32) add("packed2_coarsened_q2/band", tq / 2, tkv / 2, packed, MaskKind::kBandRandom, false, 1);
  MappingSpec packed_split{tq, tkv, true, true, 2};
  if (tkv >= 32) add("packed2_split2/random", tq, tkv / 2, packed_split, MaskKind::kRandom, false, 1);
  return cs;
}

class MmaAttention : public ::testing::TestWithParam<CompiledEntry> {};

TEST_P(MmaAttention, MatchesFloat64ReferenceOnEveryMapping) {
  TESSERA_REQUIRE_GPU();
  const CompiledEntry e = GetParam();
  int dev = 0, optin = 0;
  TESSERA_CUDA_CHECK(cudaGetDevice(&dev));
  TESSERA_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if (e.smem_bytes > std::size_t(optin)) GTEST_SKIP() << "entry needs more shared memory than this GPU has";
  std::uint64_t seed = std::hash<std::string_view>{}(e.name) ^ static_cast<std::uint64_t>(time(nullptr));
  for (const Case& c : cases_for(e)) check_case(e, c, ++seed, launches_for(e));
}

// The premise of the halves cases (no GPU needed): with B_Q = 64 on a 128-row tile, the union list of a query-block
// pair holds runs of entries foreign to one block longer than the largest ring (4 stages) at its start, in its
// middle and at its end, so the skipping consumer's flush, lookahead and trailing skips all run.
TEST(MmaAttentionMasks, HalvesGiveLongForeignRunsAtStartMiddleAndEnd) {
  const int n_kvb = kHalvesKvBlocks + 1, n_qb = 4;
  const BlockMask m = make_mask(1, 1, n_qb, n_kvb, MaskKind::kHalves, 0.0, 1);
  for (int pair = 0; pair + 1 < n_qb; pair += 2) {
    std::vector<int> owner;  // per union entry: 1 = the even block only, 2 = the odd one only, 3 = both
    for (int kb = 0; kb < n_kvb; ++kb) {
      const int o = (m.at(0, 0, pair, kb) ? 1 : 0) | (m.at(0, 0, pair + 1, kb) ? 2 : 0);
      if (o) owner.push_back(o);
    }
    auto longest_run = [&](int foreign_to, std::size_t from, std::size_t to) {  // entries without block bit
      int best = 0, run = 0;
      for (std::size_t i = from; i < to; ++i) run = (owner[i] & foreign_to) ? 0 : run + 1, best = std::max(best, run);
      return best;
    };
    const std::size_t n = owner.size(), half = n / 2;
    EXPECT_GT(longest_run(2, 0, half), 4) << "a run the odd block skips near the start";
    EXPECT_GT(longest_run(1, half, n), 4) << "a run the even block skips in the second half";
    EXPECT_EQ(owner.front() & 2, 0) << "the list starts with an entry the odd block skips";
    EXPECT_EQ(owner.back() & 1, 0) << "the list ends with an entry the even block skips";
  }
}

INSTANTIATE_TEST_SUITE_P(Catalog, MmaAttention, ::testing::ValuesIn(kernels::compiled_entries()),
                         [](const ::testing::TestParamInfo<CompiledEntry>& info) {
                           std::string n(info.param.name);
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(MmaAttention);

// The host catalog's shared memory per entry (what eligibility compares with each arch's limit) is the amount the
// launcher asks for, and the arch's limit is what this GPU reports (checks src/core/arch_limits.cpp on the GPU).
TEST(MmaCatalog, SharedMemoryMatchesTheHostCatalogAndTheDeviceLimit) {
  for (const CompiledEntry& ce : kernels::compiled_entries()) {
    const CatalogEntry* e = find_catalog_entry(ce.name);
    ASSERT_NE(e, nullptr) << ce.name;
    EXPECT_EQ(e->smem_bytes, ce.smem_bytes) << ce.name;
    EXPECT_EQ(e->persistent_ctas, ce.persistent_ctas) << ce.name;
  }
  TESSERA_REQUIRE_GPU();
  int dev = 0, major = 0, minor = 0, optin = 0;
  TESSERA_CUDA_CHECK(cudaGetDevice(&dev));
  TESSERA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  TESSERA_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  TESSERA_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  const std::string name = "sm" + std::to_string(10 * major + minor) + (major == 9 ? "a" : "");
  const std::optional<Arch> arch = arch_from_name(name);
  if (!arch) GTEST_SKIP() << name << " is not a Tessera target";
  EXPECT_EQ(std::size_t(optin), max_dynamic_smem_bytes(*arch)) << name;
  for (const CompiledEntry& ce : kernels::compiled_entries())
    EXPECT_EQ(entry_targets(*find_catalog_entry(ce.name), *arch), ce.smem_bytes <= std::size_t(optin)) << ce.name;
}

TEST(MmaAttentionLaunch, RejectsBadArgumentsBeforeLaunch) {
  const auto& entries = kernels::compiled_entries();
  ASSERT_FALSE(entries.empty());
  const CompiledEntry& e = entries.front();
  kernels::AttentionParams p;
  p.dtype = e.dtype == DType::kBFloat16 ? DType::kFloat16 : DType::kBFloat16;
  try {
    kernels::validate_attention(e, kernels::KvVariant::kSpan, p);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_EQ(err.argument(), "q.dtype");
  }
  try {
    kernels::launch_attention("mma.no.such.entry", kernels::KvVariant::kSpan, p, nullptr);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kUnsupported);
  }
}

// Launch parameters that entry `e`'s validation accepts for a span launch of one token (pointers to a static dummy;
// validation only, nothing is launched).
kernels::AttentionParams valid_params(const CompiledEntry& e) {
  alignas(16) static std::int32_t dummy[16];
  kernels::AttentionParams p;
  p.dtype = e.dtype;
  p.head_dim = e.head_dim;
  p.q = p.k = p.v = p.o = dummy;
  p.batch = p.n_q = p.n_kv = p.h_q = p.h_kv = 1;
  p.scale = 1.f;
  p.block_q = e.tile_q;
  p.block_kv = e.tile_kv;
  p.meta.kv_tile = dummy;
  return p;
}

// Membership words (TileMetadataView::member_bytes) must be 1, 2, 4 or 8 bytes and hold the tile's query sub-blocks
// (8 bits each): checked before any launch.
TEST(MmaAttentionLaunch, RejectsMembershipWordsThatCannotHoldTheTile) {
  const auto& entries = kernels::compiled_entries();
  ASSERT_FALSE(entries.empty());
  const CompiledEntry& e = entries.front();
  kernels::AttentionParams p = valid_params(e);
  p.meta.member = p.meta.kv_tile;
  auto argument = [&](kernels::KvVariant v) -> std::string {
    try {
      kernels::validate_attention(e, v, p);
    } catch (const Error& err) {
      return err.argument();
    }
    return "";
  };
  for (const int bytes : {0, 3, 16}) {
    p.meta.member_bytes = bytes;
    EXPECT_EQ(argument(kernels::KvVariant::kSpanMasked), "meta.member_bytes") << bytes;
  }
  p.meta.member_bytes = 1;  // one query sub-block
  EXPECT_EQ(argument(kernels::KvVariant::kSpanMasked), "");
  if (e.tile_q >= 32) {  // two query sub-blocks of B_Q = T_Q / 2 need two bytes
    p.block_q = e.tile_q / 2;
    EXPECT_EQ(argument(kernels::KvVariant::kSpanMasked), "meta.member_bytes");
    p.meta.member_bytes = 2;
    EXPECT_EQ(argument(kernels::KvVariant::kSpanMasked), "");
  }
}

// Persistent launches need the ticket counter, and max_ctas cannot be negative: checked before any launch. Entries
// that run one CTA per item ignore both the plan's persistence and the counter.
TEST(MmaAttentionLaunch, RejectsPersistentLaunchesWithoutItemCounterAndNegativeMaxCtas) {
  alignas(16) static std::int32_t dummy[16];
  for (const CompiledEntry& e : kernels::compiled_entries()) {
    SCOPED_TRACE(std::string(e.name));
    kernels::AttentionParams p = valid_params(e);
    auto argument = [&] {
      try {
        kernels::validate_attention(e, kernels::KvVariant::kSpan, p);
      } catch (const Error& err) {
        return err.argument();
      }
      return std::string();
    };
    EXPECT_EQ(argument(), "");
    p.max_ctas = -1;
    EXPECT_EQ(argument(), "max_ctas");
    p.max_ctas = 0;
    p.meta.persistent = 1;
    EXPECT_EQ(argument(), e.persistent_ctas ? "meta.item_counter" : "");
    p.meta.item_counter = reinterpret_cast<std::uint32_t*>(reinterpret_cast<char*>(dummy) + 2);
    EXPECT_EQ(argument(), e.persistent_ctas ? "meta.item_counter" : "");
    p.meta.item_counter = reinterpret_cast<std::uint32_t*>(dummy);
    EXPECT_EQ(argument(), "");
  }
}

}  // namespace
}  // namespace tessera::testing
