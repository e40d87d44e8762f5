//! The run-time policy the Elixir side derives from the device class at start (see
//! `Nx.Vulkan.Device.configure/0`): which kernel variants and precisions ops take. A leaf module,
//! so ops, pipelines and the device NIFs can all read it without depending on each other.
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// A developer's on/off switch from the environment (read by the caller once): `1` on, `0` off,
/// anything else (or unset) None, the default. For the A/B knobs of the compiler (NXV_FUSE,
/// NXV_GEMM_EPILOGUE, NXV_REDUCE_PROLOGUES, NXV_PRERECORD), of lazy views (NXV_LAZY_VIEWS) and of
/// the recorder's dependency order (NXV_REORDER) and of the radix sort (NXV_RADIX_SORT).
pub fn env_switch(name: &str) -> Option<bool> {
    match std::env::var(name).as_deref() {
        Ok("1") => Some(true),
        Ok("0") => Some(false),
        _ => None,
    }
}

/// Whether f32/f16 element-wise math and sums route through f64 and round once (matching
/// Nx.BinaryBackend, which computes in f64, in all but rare last-bit cases). On where f64 is
/// fast (CPUs and data-centre GPUs) unless NXV_PRECISE says otherwise.
pub static PRECISE_F32: AtomicBool = AtomicBool::new(false);

pub fn precise_f32() -> bool {
    PRECISE_F32.load(Ordering::Relaxed)
}

/// Whether f32/f16 dot products (and conv, which runs on them) accumulate in f64 and round once.
/// On CPU devices by default (the suite compares with the BinaryBackend there); on GPUs f32
/// accumulation, as cuBLAS and PyTorch do, because the f64 accumulator cannot take the
/// register-blocked kernel (measured 4x slower there) and costs GEMM 5-8x on the H200
/// (NXV_PRECISE_DOT or NXV_PRECISE turn it on).
pub static PRECISE_DOT: AtomicBool = AtomicBool::new(false);

pub fn precise_dot() -> bool {
    PRECISE_DOT.load(Ordering::Relaxed)
}

/// Whether the device is a CPU (device class `:software`): it then takes the kernel variants
/// without workgroup barriers (gemm_rows, reduce_serial), which measure ~10x faster on lavapipe.
pub static CPU_DEVICE: AtomicBool = AtomicBool::new(false);

pub fn cpu_device() -> bool {
    CPU_DEVICE.load(Ordering::Relaxed)
}

/// Elements each invocation of the element-wise kernels visits (their specialization constant 2,
/// common.glsl's FOR_EACH_ELEMENT). Set at start from the device class (GPUs 4: a quarter of the
/// invocations, each visiting four elements, measured faster on the H200; CPU devices 1, where
/// lavapipe runs the loop slower than the invocations it saves) or NXV_ELEMENTS_PER_INVOCATION.
pub static ELEMENTS_PER_INVOCATION: AtomicU32 = AtomicU32::new(1);

pub fn elements_per_invocation() -> u32 {
    ELEMENTS_PER_INVOCATION.load(Ordering::Relaxed)
}

/// Invocations per workgroup of the element-per-invocation kernels (their specialization constant
/// 3, common.glsl). Set once at start, before any pipeline exists, from the device class (GPUs
/// 256; CPU devices 64, where lavapipe runs all of a workgroup's invocations however few elements
/// it has: a scalar dispatch measured 5.6-7 -> 0.6 us) or NXV_WORKGROUP_SIZE.
pub static WORKGROUP: AtomicU32 = AtomicU32::new(256);

pub fn workgroup() -> u64 {
    WORKGROUP.load(Ordering::Relaxed) as u64
}

/// The register-blocked GEMM's block edge when forced (64 or 128; 0: chosen by shape, see
/// ops/matmul.rs). NXV_GEMM_BLOCK sets it, to measure crossovers on a new device.
pub static GEMM_BLOCK: AtomicU32 = AtomicU32::new(0);

pub fn gemm_block() -> u32 {
    GEMM_BLOCK.load(Ordering::Relaxed)
}

/// Whether f16 (and bf16) GEMMs take the tensor-core kernel (gemm_coop.comp) where the device has NV
/// cooperative matrices, and with which block: 0 off (NXV_GEMM_COOP=0), 1 the block by shape
/// (ops/matmul.rs coop_block), 2 + b block b forced (NXV_GEMM_COOP=128x256, ..., to measure
/// crossovers). Set at start by configure: on the H200 the tensor cores measured 125 TFLOP/s at
/// 4096^3 (a0186a8) against the register-blocked kernel's 27.3.
pub static GEMM_COOP: AtomicU32 = AtomicU32::new(0);

pub fn gemm_coop() -> bool {
    GEMM_COOP.load(Ordering::Relaxed) != 0
}

/// The tensor-core block forced by NXV_GEMM_COOP, if any.
pub fn gemm_coop_forced() -> Option<u32> {
    GEMM_COOP.load(Ordering::Relaxed).checked_sub(2)
}
