// tessera._C.run_cpu: the CPU execution path (selection, CPU launch preparation, float64 plan executor).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "request_args.hpp"
#include "tessera/runtime_cpu.hpp"

namespace tessera::py {

namespace nb = nanobind;

void bind_cpu(nb::module_& m) {
  m.def(
      "run_cpu",
      [](const Array& q, const Array& k, const Array& v, const Array& o, const std::optional<Array>& lse, int block_q,
         int block_kv, int mask_kind, const Array& m0, const std::optional<Array>& m1, std::int64_t mb,
         std::int64_t mh, std::int64_t n_qb, std::int64_t n_kvb, std::optional<double> scale, const std::string& arch,
         const std::string& plan_id, bool use_plan_table, const std::string& plan_table_path) {
        const AttentionRequest r = make_request(q, k, v, o, lse, block_q, block_kv, mask_kind, m0, m1, mb, mh, n_qb,
                                                n_kvb, scale);
        CpuRunOptions opt;
        opt.arch = arch;
        opt.plan_id = plan_id;
        opt.use_plan_table = use_plan_table;
        opt.plan_table_path = plan_table_path;
        DispatchInfo info;
        {
          nb::gil_scoped_release release;
          info = run_cpu(r, opt);
        }
        return dispatch_to_dict(info);
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("o"), nb::arg("lse").none(), nb::arg("block_q"),
      nb::arg("block_kv"), nb::arg("mask_kind"), nb::arg("m0"), nb::arg("m1").none(), nb::arg("mb"), nb::arg("mh"),
      nb::arg("n_qb"), nb::arg("n_kvb"), nb::arg("scale").none(), nb::arg("arch"), nb::arg("plan_id"),
      nb::arg("use_plan_table"), nb::arg("plan_table_path") = "",
      "Computes E(M) on the CPU (float64) into o (and lse). Low-level: use tessera.block_sparse_attention.\n"
      "plan_table_path: a user plan table ('' = the embedded table of arch).\n"
      "Returns the dispatch dict (plan_id, regime, source, table_status, mask statistics, host timings in microseconds).");
}

}  // namespace tessera::py
