// hopper_gemm.cu: a Hopper (sm_90a) GEMM written with CuTe: TMA loads into 128-byte-swizzled shared
// memory, a 4-stage mbarrier pipeline, and wgmma (HGMMA) tensor-core instructions with fp32
// accumulators.
//
//   C[M, N] = A[M, K] . B[N, K]^T      A, B, C row-major; fp16 or bf16 in and out, fp32 accumulation
//
// (the layout of torch.nn.functional.linear: both operands K-major, which is what wgmma reads from
// shared memory without transposition).
//
// One CTA of 256 threads (two warpgroups) computes a 128x256 tile of C. Each warpgroup owns 64 rows
// and issues SM90 64x256x16 wgmma instructions whose A and B operands are read straight from shared
// memory through GMMA descriptors (CuTe's TiledMMA and make_fragment_A/B build them from the smem
// layouts). K advances 64 at a time: thread 0 keeps up to 4 stages of A (128x64) and B (256x64) in
// flight with TMA (cp.async.bulk.tensor), each stage guarded by a "full" transaction barrier, which
// the TMA unit completes, and an "empty" barrier on which the 8 warps arrive once the wgmma reading
// that stage has retired. The mainloop keeps one wgmma batch in flight (warpgroup_wait<1>) so that
// issuing the next k-tile overlaps the tensor cores' work on the previous one.
//
// The TMA descriptors (CUtensorMap, 128 bytes) are built on the host with the driver's
// cuTensorMapEncodeTiled (kernelscope.fast.tensor_map_2d does that from Python) and passed by value
// as __grid_constant__ parameters: box 64 (K) x 128 rows for A and 64 x 256 rows for B, 128-byte
// swizzle, out-of-range elements filled with zeros (so M, N and K need not be multiples of the tile;
// K must be a multiple of 8 for the 16-byte row pitch TMA requires). Out-of-range rows and columns of
// C are not written.
//
// Build: nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -I<cutlass>/include -cubin
// (or kernelscope's compile tool with cutlass=true, arch sm_90a). Dynamic shared memory:
// kSmemBytes (197 KiB), set as the kernels' maximum dynamic shared memory before launch.

#include <cute/tensor.hpp>
#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/arch/mma_sm90_gmma.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/numeric_types.h>

namespace hopper_gemm {

using namespace cute;

constexpr int kTileM = 128;
constexpr int kTileN = 256;
constexpr int kTileK = 64;   // 64 halves = 128 bytes: one swizzle row
constexpr int kStages = 4;
constexpr int kThreads = 256;
constexpr int kEpiPitch = kTileN + 8;  // 528-byte rows: the 8 rows one warp writes fall in different banks

using TileM = Int<kTileM>;
using TileN = Int<kTileN>;
using TileK = Int<kTileK>;
using Stages = Int<kStages>;

template <class T> struct WgmmaOp;
template <> struct WgmmaOp<cutlass::half_t> {
  using type = SM90_64x256x16_F32F16F16_SS<GMMA::Major::K, GMMA::Major::K>;
};
template <> struct WgmmaOp<cutlass::bfloat16_t> {
  using type = SM90_64x256x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>;
};

template <class T>
struct Config {
  // (rows, k, stage): rows of 128 bytes, the 128-byte swizzle TMA writes and wgmma reads.
  using SmemLayoutA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<T>{}, make_shape(TileM{}, TileK{}, Stages{})));
  using SmemLayoutB = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<T>{}, make_shape(TileN{}, TileK{}, Stages{})));
  // two warpgroups stacked along M, each a 64x256 wgmma
  using TiledMma = decltype(make_tiled_mma(typename WgmmaOp<T>::type{}, Layout<Shape<_2, _1, _1>>{}));
  static_assert(size(TiledMma{}) == kThreads, "two warpgroups");
  static constexpr int kStageElemsA = kTileM * kTileK;
  static constexpr int kStageElemsB = kTileN * kTileK;
  static constexpr uint32_t kStageBytes = uint32_t((kStageElemsA + kStageElemsB) * sizeof(T));
};

template <class T>
struct SharedStorage {
  alignas(1024) T a[cosize_v<typename Config<T>::SmemLayoutA>];
  alignas(1024) T b[cosize_v<typename Config<T>::SmemLayoutB>];
  alignas(8) uint64_t full[kStages];   // TMA -> MMA: the stage's bytes have landed
  alignas(8) uint64_t empty[kStages];  // MMA -> TMA: every warp is done reading the stage
};

// +1 KiB: the dynamic shared memory window is aligned to 1024 bytes by hand (the swizzle's period)
constexpr int kSmemBytes = int(sizeof(SharedStorage<cutlass::half_t>)) + 1024;
static_assert(sizeof(SharedStorage<cutlass::half_t>) == sizeof(SharedStorage<cutlass::bfloat16_t>));
static_assert(sizeof(SharedStorage<cutlass::half_t>::a) % 1024 == 0, "b must follow a directly");
static_assert(kTileM * kEpiPitch * 2 <= sizeof(SharedStorage<cutlass::half_t>::a) + sizeof(SharedStorage<cutlass::half_t>::b),
              "the epilogue tile fits in the stage buffers");
// hopper_gemm.py launches with these numbers: change both together
static_assert(kTileM == 128 && kTileN == 256 && kThreads == 256 && kSmemBytes == 198656, "update hopper_gemm.py");

template <class T>
__device__ __forceinline__ void gemm_tile(TmaDescriptor const& tma_a, TmaDescriptor const& tma_b, T* C,
                                          int M, int N, int K, unsigned char* smem_raw) {
  using Cfg = Config<T>;
  using FullBarrier = cutlass::arch::ClusterTransactionBarrier;
  using EmptyBarrier = cutlass::arch::ClusterBarrier;

  uint32_t raw_addr = cast_smem_ptr_to_uint(smem_raw);
  auto& smem = *reinterpret_cast<SharedStorage<T>*>(smem_raw + ((1024u - (raw_addr & 1023u)) & 1023u));

  Tensor sA = make_tensor(make_smem_ptr(smem.a), typename Cfg::SmemLayoutA{});  // (BM, BK, STAGES)
  Tensor sB = make_tensor(make_smem_ptr(smem.b), typename Cfg::SmemLayoutB{});  // (BN, BK, STAGES)

  const int tid = int(threadIdx.x);
  const bool leader = tid == 0;
  const bool warp_leader = (tid % 32) == 0;
  const int m0 = int(blockIdx.y) * kTileM;
  const int n0 = int(blockIdx.x) * kTileN;
  const int k_tiles = (K + kTileK - 1) / kTileK;

  if (leader) {
    prefetch_tma_descriptor(&tma_a);
    prefetch_tma_descriptor(&tma_b);
    CUTE_UNROLL
    for (int s = 0; s < kStages; ++s) {
      FullBarrier::init(&smem.full[s], 1);
      EmptyBarrier::init(&smem.empty[s], kThreads / 32);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  // thread 0: arm stage `s` for the bytes of k-tile `kt` and start both TMA loads into it
  auto load_stage = [&](int kt, int s) {
    FullBarrier::arrive_and_expect_tx(&smem.full[s], Cfg::kStageBytes);
    constexpr uint64_t hint = static_cast<uint64_t>(TMA::CacheHintSm90::EVICT_NORMAL);
    SM90_TMA_LOAD_2D::copy(&tma_a, &smem.full[s], hint, smem.a + s * Cfg::kStageElemsA, kt * kTileK, m0);
    SM90_TMA_LOAD_2D::copy(&tma_b, &smem.full[s], hint, smem.b + s * Cfg::kStageElemsB, kt * kTileK, n0);
  };

  if (leader) {
    for (int s = 0; s < kStages && s < k_tiles; ++s) load_stage(s, s);
  }

  typename Cfg::TiledMma mma;
  auto thr_mma = mma.get_thread_slice(tid);
  Tensor tCsA = thr_mma.partition_A(sA);            // (MMA, MMA_M, MMA_K, STAGES)
  Tensor tCsB = thr_mma.partition_B(sB);            // (MMA, MMA_N, MMA_K, STAGES)
  Tensor tCrA = thr_mma.make_fragment_A(tCsA);      // GMMA descriptors over shared memory
  Tensor tCrB = thr_mma.make_fragment_B(tCsB);
  Tensor acc = partition_fragment_C(mma, Shape<TileM, TileN>{});  // (MMA, MMA_M, MMA_N) fp32
  clear(acc);

  for (int kt = 0; kt < k_tiles; ++kt) {
    const int s = kt % kStages;
    FullBarrier::wait(&smem.full[s], (kt / kStages) & 1);

    warpgroup_fence_operand(acc);
    warpgroup_arrive();
    cute::gemm(mma, tCrA(_, _, _, s), tCrB(_, _, _, s), acc);  // 4 wgmma per warpgroup (K 64 = 4 x 16)
    warpgroup_commit_batch();
    warpgroup_wait<1>();                                        // k-tile kt-1's wgmma have retired
    warpgroup_fence_operand(acc);

    if (kt > 0) {
      const int ps = (kt - 1) % kStages;
      if (warp_leader) EmptyBarrier::arrive(&smem.empty[ps]);
      const int next = kt - 1 + kStages;
      if (leader && next < k_tiles) {
        EmptyBarrier::wait(&smem.empty[ps], ((kt - 1) / kStages) & 1);
        load_stage(next, ps);
      }
    }
  }
  warpgroup_wait<0>();
  warpgroup_fence_operand(acc);

  // Epilogue: accumulators -> T -> a padded row-major tile in shared memory (the stage buffers are
  // free once both warpgroups are past their last wgmma) -> coalesced 16-byte stores to C, skipping
  // what lies outside M x N. (Storing the accumulators straight from registers, with one predicate
  // per element, made ptxas serialize the mainloop's wgmma: its warning C7514.)
  __syncthreads();
  T* epi = smem.a;  // b follows a directly: both are 1024-aligned and a's size is a multiple of 1024
  Tensor sC = make_tensor(make_smem_ptr(epi), make_layout(Shape<TileM, TileN>{}, Stride<Int<kEpiPitch>, _1>{}));
  Tensor tCsC = thr_mma.partition_C(sC);
  Tensor out = make_tensor_like<T>(acc);
  CUTE_UNROLL
  for (int i = 0; i < size(acc); ++i) out(i) = T(acc(i));
  copy(AutoVectorizingCopyWithAssumedAlignment<32>{}, out, tCsC);  // neighbouring values share a row
  __syncthreads();

  constexpr int kChunk = 16 / int(sizeof(T));  // elements per 16-byte store
  constexpr int kChunksPerRow = kTileN / kChunk;
  const bool vector_ok = (N % kChunk) == 0;    // rows of C start 16-byte aligned
  for (int c = tid; c < kTileM * kChunksPerRow; c += kThreads) {
    const int r = c / kChunksPerRow;
    const int col = (c % kChunksPerRow) * kChunk;
    const int gr = m0 + r;
    const int gc = n0 + col;
    if (gr >= M || gc >= N) continue;
    T const* src = epi + r * kEpiPitch + col;
    T* dst = C + size_t(gr) * size_t(N) + gc;
    if (vector_ok && gc + kChunk <= N) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<uint4 const*>(src);
    } else {
      for (int j = 0; j < kChunk && gc + j < N; ++j) dst[j] = src[j];
    }
  }
}

}  // namespace hopper_gemm

extern "C" __global__ void __launch_bounds__(256, 1)
hopper_gemm_f16(const __grid_constant__ cute::TmaDescriptor tma_a, const __grid_constant__ cute::TmaDescriptor tma_b,
                cutlass::half_t* C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  hopper_gemm::gemm_tile<cutlass::half_t>(tma_a, tma_b, C, M, N, K, smem_raw);
}

extern "C" __global__ void __launch_bounds__(256, 1)
hopper_gemm_bf16(const __grid_constant__ cute::TmaDescriptor tma_a, const __grid_constant__ cute::TmaDescriptor tma_b,
                 cutlass::bfloat16_t* C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  hopper_gemm::gemm_tile<cutlass::bfloat16_t>(tma_a, tma_b, C, M, N, K, smem_raw);
}
