#pragma once
/// @file tessera.hpp
/// Umbrella header of Tessera's public host API. Including it needs no CUDA headers.
#include "tessera/cuda_types.hpp"
#include "tessera/dtype.hpp"
#include "tessera/error.hpp"
#include "tessera/geometry.hpp"
#include "tessera/mask.hpp"
#include "tessera/mask_state.hpp"
#include "tessera/mask_state_gpu.hpp"
#include "tessera/request.hpp"
#include "tessera/tensor.hpp"
#include "tessera/version.hpp"
