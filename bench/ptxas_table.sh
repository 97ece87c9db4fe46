#!/bin/bash
# Regenerates the ptxas tables of docs/kernels_mma.md and docs/kernels_wgmma.md: for every entry of the family
# FAMILY (Mma, the default, or Wgmma) in src/kernels/catalog.def, compiles its three kernel variants (span,
# span_masked, packed) for one arch with -Xptxas -v and prints a markdown table (registers, spill bytes, dynamic
# shared memory from Config::kSmemBytes; Wgmma entries also their persistent-CTA kernels' spills). Wgmma entries are compiled for sm_90a whatever the arch argument; their
# register count is the cap at entry (__launch_bounds__), which setmaxnreg then splits between producer and
# consumers (docs/kernels_wgmma.md). No GPU needed.
# Usage: [FAMILY=Wgmma] bench/ptxas_table.sh [arch (default sm_90a)] [name regex (default .)]  (repository root)
set -euo pipefail
arch=${1:-sm_90a}
filter=${2:-.}
nvcc=${NVCC:-nvcc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT; [[ -n ${KEEP_LOG:-} ]] && trap - EXIT
root=$(pwd)
family=${FAMILY:-Mma}
re='^TESSERA_CATALOG_ENTRY\("([^"]+)", *'"$family"', *(BFloat16|Float16), *([0-9]+), *([0-9]+), *([0-9]+), *([0-9]+), *([0-9]+)\)'

# Dynamic shared memory per entry, from the same Config the kernels use (config.cuh is plain C++).
cat > "$tmp/smem.cpp" <<CPP
#include <cstdio>
#include "kernels/mma/config.cuh"
#include "kernels/wgmma/config.cuh"
template <int D, int TQ, int TKV, int W, int S>
std::size_t smem_Mma() { return tessera::kernels::mma::Config<int, D, TQ, TKV, W, S>::kSmemBytes; }
template <int D, int TQ, int TKV, int W, int S>
std::size_t smem_Wgmma() { return tessera::kernels::wgmma::Config<int, D, TQ, TKV, W, S>::kSmemBytes; }
#define TESSERA_CATALOG_ENTRY(name, fam, dt, d, tq, tkv, w, s) std::printf("%s %zu\\n", name, smem_##fam<d, tq, tkv, w, s>());
int main() {
#include "kernels/catalog.def"
}
CPP
${CXX:-c++} -std=c++20 -I"$root/src" -o "$tmp/smem" "$tmp/smem.cpp" 2>/dev/null || { echo "smem helper failed" >&2; exit 1; }
"$tmp/smem" > "$tmp/smem.txt"

if [[ $family == Wgmma ]]; then
  echo "| entry | smem (B) | regs span / span_masked / packed | spills st/ld (B) span / span_masked / packed | persistent CTAs: spills st/ld (B) |"
  echo "|---|---|---|---|---|"
else
  echo "| entry | smem (B) | regs span / span_masked / packed | spills st/ld (B) span / span_masked / packed |"
  echo "|---|---|---|---|"
fi
while IFS= read -r line; do
  [[ $line =~ $re ]] || continue
  name=${BASH_REMATCH[1]} dt=${BASH_REMATCH[2]} d=${BASH_REMATCH[3]} tq=${BASH_REMATCH[4]} tkv=${BASH_REMATCH[5]}
  w=${BASH_REMATCH[6]} s=${BASH_REMATCH[7]}
  [[ $name =~ $filter ]] || continue
  ctype=__nv_bfloat16; [[ $dt == Float16 ]] && ctype=__half
  if [[ $family == Wgmma ]]; then
    ns=wgmma hdr=kernels/wgmma/attention.cuh param="__grid_constant__ KernelParams" gencode="-gencode=arch=compute_90a,code=sm_90a"
  else
    ns=mma hdr=kernels/mma/attention.cuh param=AttentionParams gencode="-arch=$arch"
  fi
  if [[ $family == Wgmma ]]; then  # one CTA per item (false) and, on tiles that have them, persistent CTAs (true)
    cat > "$tmp/e.cu" <<CU
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <array>
#include "$hdr"
namespace tessera::kernels::$ns {
using C = Config<$ctype, $d, $tq, $tkv, $w, $s>;
template __global__ void attention_kernel<C, KvVariant::kSpan, false>(const $param);
template __global__ void attention_kernel<C, KvVariant::kSpanMasked, false>(const $param);
template __global__ void attention_kernel<C, KvVariant::kPacked, false>(const $param);
std::array<const void*, 3> persistent_kernels() {
  if constexpr (C::kPersistent)
    return {(const void*)&attention_kernel<C, KvVariant::kSpan, true>,
            (const void*)&attention_kernel<C, KvVariant::kSpanMasked, true>,
            (const void*)&attention_kernel<C, KvVariant::kPacked, true>};
  else return {};
}
}
CU
  else
    cat > "$tmp/e.cu" <<CU
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "$hdr"
namespace tessera::kernels::$ns {
using C = Config<$ctype, $d, $tq, $tkv, $w, $s>;
template __global__ void attention_kernel<C, KvVariant::kSpan>(const $param);
template __global__ void attention_kernel<C, KvVariant::kSpanMasked>(const $param);
template __global__ void attention_kernel<C, KvVariant::kPacked>(const $param);
}
CU
  fi
  "$nvcc" -std=c++20 $gencode -cubin -O3 --expt-relaxed-constexpr -Xptxas -v -I"$root/src" -I"$root/include" \
    -o "$tmp/e.cubin" "$tmp/e.cu" > "$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
  # ptxas prints one block per kernel: "Compiling entry function '<mangled>'", spills, "Used N registers".
  # KvVariant enumerators mangle as ...KvVariantE0 (span), E1 (span_masked), E2 (packed); the wgmma kernels' bool
  # (persistent CTAs) follows as Lb0E / Lb1E.
  regs=() spills=() pspills=()
  for v in 0 1 2; do
    key="KvVariantE$v"; [[ $family == Wgmma ]] && key="KvVariantE${v}ELb0E"
    blk=$(awk -v v="$key" '/Compiling entry function/ {on = index($0, v) > 0} on' "$tmp/log")
    regs+=("$(grep -o 'Used [0-9]* registers' <<< "$blk" | grep -o '[0-9]*' | head -1)")
    spills+=("$(sed -n 's/.* \([0-9]*\) bytes spill stores, \([0-9]*\) bytes spill loads.*/\1\/\2/p' <<< "$blk" | head -1)")
    blk=$(awk -v v="KvVariantE${v}ELb1E" '/Compiling entry function/ {on = index($0, v) > 0} on' "$tmp/log")
    pspills+=("$(sed -n 's/.* \([0-9]*\) bytes spill stores, \([0-9]*\) bytes spill loads.*/\1\/\2/p' <<< "$blk" | head -1)")
  done
  smem=$(awk -v n="$name" '$1 == n {print $2}' "$tmp/smem.txt")
  row="| $name | $smem | ${regs[0]} / ${regs[1]} / ${regs[2]} | ${spills[0]} / ${spills[1]} / ${spills[2]} |"
  if [[ $family == Wgmma ]]; then
    if [[ -n ${pspills[0]} ]]; then row+=" ${pspills[0]} / ${pspills[1]} / ${pspills[2]} |"; else row+=" - |"; fi
  fi
  echo "$row"
done < src/kernels/catalog.def
