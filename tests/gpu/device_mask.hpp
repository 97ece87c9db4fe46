#pragma once
// GPU test helper: copies a host-encoded mask (tests/mask_gen.hpp) to device memory, keeping its layout.
#include <cuda_runtime.h>

#include "mask_gen.hpp"
#include "tessera/cuda_types.hpp"

namespace tessera::testing {

/// A mask in device memory: the same bytes as the host encoding, views re-pointed at the device copies.
struct DeviceMaskCopy {
  DeviceBuffer buf[2];
  BlockMask mask;
};

inline DeviceMaskCopy upload(HostMaskTensors& h) {
  DeviceMaskCopy d;
  d.mask = h.mask;
  for (int i = 0; i < 2; ++i) {
    TensorView* hv = h.slot(i);
    if (!hv) continue;
    d.buf[i] = DeviceBuffer(h.buf[i].size());
    if (cudaMemcpy(d.buf[i].data(), h.buf[i].data(), h.buf[i].size(), cudaMemcpyHostToDevice) != cudaSuccess) {
      throw std::runtime_error("cudaMemcpy failed");
    }
    const auto offset = static_cast<const unsigned char*>(hv->data) - h.buf[i].data();
    TensorView* dv = nullptr;
    switch (d.mask.format) {
      case MaskFormat::kDense: dv = &d.mask.dense; break;
      case MaskFormat::kBlockCsr: dv = i == 0 ? &d.mask.row_offsets : &d.mask.col_indices; break;
      case MaskFormat::kIndexLists: dv = i == 0 ? &d.mask.counts : &d.mask.indices; break;
    }
    dv->data = d.buf[i].as<unsigned char>() + offset;
    dv->device = Device::kCuda;
  }
  return d;
}

}  // namespace tessera::testing
