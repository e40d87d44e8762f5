//! Every shader variant, compiled from GLSL at build time by vulkano-shaders: one source per op
//! family, dtype variants by defines. The numeric dtypes' defines are written once (the
//! `numeric_variant!` table) and each family lists which dtypes it builds (`numeric_family!`),
//! which makes a module per family holding one compiled module and one `Kernel` constant per
//! dtype (e.g. `unary::F32P`, named "unary_f32p") and the family's lookup table. Kernels that
//! come by element width or stand alone are listed one by one (`kernels!`).
#![allow(non_upper_case_globals, non_snake_case)]
use crate::dtype::Dtype;
use crate::pipelines::Kernel;

/// One variant: a module with the compiled SPIR-V and a `Kernel` constant of the same name,
/// which the pipeline cache loads on first use.
macro_rules! kernel {
    ($variant:ident, $name:expr, $path:literal $(, $define:literal = $value:literal)*) => {
        pub mod $variant {
            vulkano_shaders::shader! {
                ty: "compute",
                path: $path,
                define: [$(($define, $value)),*],
                vulkan_version: "1.2",
                spirv_version: "1.3",
            }
        }
        pub const $variant: Kernel = Kernel {
            name: $name,
            load: $variant::load,
            vectorized: defines_t4(&[$($define),*]),
            source: include_str!(concat!("../", $path)),
            defines: &[$(($define, $value)),*],
        };
    };
}

macro_rules! kernels {
    ($($variant:ident => $path:literal $(, $define:literal = $value:literal)*;)*) => {
        $( kernel!($variant, stringify!($variant), $path $(, $define = $value)*); )*
        /// The kernels listed one by one (see `all`).
        const STANDALONE: &[Kernel] = &[$($variant),*];
    };
}

/// The numeric dtypes' defines (T storage type; W compute type; PRECISE: f32/f16 math in f64;
/// IS_F64; IS_INT, IS_SIGNED, BITS, T_MIN, T_MAX for integers), then the family's own (`[..]`
/// groups: the family-wide ones and the variant's).
macro_rules! numeric_variant {
    (@emit $family:ident, $path:literal, $dt:ident, $suffix:literal, [$($d:literal = $dv:literal),*], [$($c:literal = $cv:literal),*] $(, [$($o:literal = $ov:literal),*])?) => {
        kernel!($dt, concat!(stringify!($family), "_", $suffix), $path $(, $d = $dv)* $(, $c = $cv)* $($(, $o = $ov)*)?);
    };
    ($f:ident, $p:literal, F32, $($x:tt)*) => { numeric_variant!(@emit $f, $p, F32, "f32", ["T" = "float", "W" = "float"], $($x)*); };
    ($f:ident, $p:literal, F32P, $($x:tt)*) => { numeric_variant!(@emit $f, $p, F32P, "f32p", ["T" = "float", "W" = "double", "PRECISE" = "1"], $($x)*); };
    ($f:ident, $p:literal, F64, $($x:tt)*) => { numeric_variant!(@emit $f, $p, F64, "f64", ["T" = "double", "W" = "double", "IS_F64" = "1"], $($x)*); };
    ($f:ident, $p:literal, F16, $($x:tt)*) => { numeric_variant!(@emit $f, $p, F16, "f16", ["T" = "float16_t", "W" = "float"], $($x)*); };
    ($f:ident, $p:literal, F16P, $($x:tt)*) => { numeric_variant!(@emit $f, $p, F16P, "f16p", ["T" = "float16_t", "W" = "double", "PRECISE" = "1"], $($x)*); };
    ($f:ident, $p:literal, S8, $($x:tt)*) => { numeric_variant!(@emit $f, $p, S8, "s8", ["T" = "int8_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "8", "T_MIN" = "(-128)", "T_MAX" = "127"], $($x)*); };
    ($f:ident, $p:literal, S16, $($x:tt)*) => { numeric_variant!(@emit $f, $p, S16, "s16", ["T" = "int16_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "16", "T_MIN" = "(-32768)", "T_MAX" = "32767"], $($x)*); };
    ($f:ident, $p:literal, S32, $($x:tt)*) => { numeric_variant!(@emit $f, $p, S32, "s32", ["T" = "int", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "32", "T_MIN" = "(-2147483647 - 1)", "T_MAX" = "2147483647"], $($x)*); };
    ($f:ident, $p:literal, S64, $($x:tt)*) => { numeric_variant!(@emit $f, $p, S64, "s64", ["T" = "int64_t", "W" = "int64_t", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "64", "T_MIN" = "(int64_t(1) << 63)", "T_MAX" = "(~(int64_t(1) << 63))"], $($x)*); };
    ($f:ident, $p:literal, U8, $($x:tt)*) => { numeric_variant!(@emit $f, $p, U8, "u8", ["T" = "uint8_t", "W" = "uint", "IS_INT" = "1", "BITS" = "8", "T_MIN" = "0u", "T_MAX" = "255u"], $($x)*); };
    ($f:ident, $p:literal, U16, $($x:tt)*) => { numeric_variant!(@emit $f, $p, U16, "u16", ["T" = "uint16_t", "W" = "uint", "IS_INT" = "1", "BITS" = "16", "T_MIN" = "0u", "T_MAX" = "65535u"], $($x)*); };
    ($f:ident, $p:literal, U32, $($x:tt)*) => { numeric_variant!(@emit $f, $p, U32, "u32", ["T" = "uint", "W" = "uint", "IS_INT" = "1", "BITS" = "32", "T_MIN" = "0u", "T_MAX" = "4294967295u"], $($x)*); };
    ($f:ident, $p:literal, U64, $($x:tt)*) => { numeric_variant!(@emit $f, $p, U64, "u64", ["T" = "uint64_t", "W" = "uint64_t", "IS_INT" = "1", "BITS" = "64", "T_MIN" = "uint64_t(0)", "T_MAX" = "(~uint64_t(0))"], $($x)*); };
}

/// The dtype and precision a numeric variant serves.
macro_rules! variant_key {
    (F32) => { (Dtype::F32, false) };
    (F32P) => { (Dtype::F32, true) };
    (F64) => { (Dtype::F64, false) };
    (F16) => { (Dtype::F16, false) };
    (F16P) => { (Dtype::F16, true) };
    (S8) => { (Dtype::S8, false) };
    (S16) => { (Dtype::S16, false) };
    (S32) => { (Dtype::S32, false) };
    (S64) => { (Dtype::S64, false) };
    (U8) => { (Dtype::U8, false) };
    (U16) => { (Dtype::U16, false) };
    (U32) => { (Dtype::U32, false) };
    (U64) => { (Dtype::U64, false) };
}

/// A family of numeric variants: `numeric_family!(name, "path", [family-wide defines], [DTYPE,
/// DTYPE + [its own defines], ..])`.
macro_rules! numeric_family {
    ($family:ident, $path:literal, $common:tt, [$($dt:ident $(+ $own:tt)?),* $(,)?]) => {
        pub mod $family {
            use super::*;
            $( numeric_variant!($family, $path, $dt, $common $(, $own)?); )*
            /// (dtype, precise, kernel) of every variant.
            pub const VARIANTS: &[(Dtype, bool, Kernel)] = &[$({
                let (dtype, precise) = variant_key!($dt);
                (dtype, precise, $dt)
            }),*];
        }
    };
}

/// Whether a define list has "T4" (a const fn: Kernel constants are built at compile time).
const fn defines_t4(defines: &[&str]) -> bool {
    let mut i = 0;
    while i < defines.len() {
        let d = defines[i].as_bytes();
        if d.len() == 2 && d[0] == b'T' && d[1] == b'4' {
            return true;
        }
        i += 1;
    }
    false
}

numeric_family!(unary, "shaders/unary.comp", [], [F32 + ["T4" = "vec4"], F32P, F64, F16, F16P, S8, S16, S32, S64, U8, U16, U32, U64]);
numeric_family!(binary, "shaders/binary.comp", [], [F32 + ["T4" = "vec4"], F32P + ["T4" = "vec4"], F64, F16, F16P, S8, S16, S32, S64, U8, U16, U32, U64]);
numeric_family!(compare, "shaders/binary.comp", ["OUT_U8" = "1"], [F32, F64, F16, S8, S16, S32, S64, U8, U16, U32, U64]);
numeric_family!(reduce, "shaders/reduce.comp", [], [F32 + ["T4" = "vec4"], F32P + ["T4" = "vec4"], F64, F16, F16P, S8, S16, S32, S64, U8, U16, U32, U64]);
numeric_family!(reduce_out_acc, "shaders/reduce.comp", ["OUT_ACC" = "1"], [F32P + ["T4" = "vec4"], F16, F16P]);
numeric_family!(reduce_in_acc, "shaders/reduce.comp", ["IN_ACC" = "1"], [F32P, F16, F16P]);
numeric_family!(reduce_columns, "shaders/reduce_columns.comp", [], [F32, F32P, F64, F16, F16P, S8, S16, S32, S64, U8, U16, U32, U64]);
numeric_family!(reduce_columns_out_acc, "shaders/reduce_columns.comp", ["OUT_ACC" = "1"], [F32P, F16, F16P]);
numeric_family!(reduce_columns_in_acc, "shaders/reduce_columns.comp", ["IN_ACC" = "1"], [F32P, F16, F16P]);
numeric_family!(reduce_serial, "shaders/reduce_serial.comp", [], [F32, F32P, F64, F16, F16P, S8, S16, S32, S64, U8, U16, U32, U64]);
numeric_family!(gemm, "shaders/gemm.comp", [], [F32, F32P, F64, F16, F16P, S8, S16, S32, S64, U8, U16, U32, U64]);
// 32-bit accumulators only (ops/matmul.rs, gemm_ksplit_fits).
numeric_family!(gemm_ksplit, "shaders/gemm.comp", ["KSPLIT" = "16", "TILE" = "8", "KT" = "32"], [F32, F16, S8, S16, S32, U8, U16, U32]);
// 32-bit accumulators only (see ops/matmul.rs).
numeric_family!(gemm_tiled, "shaders/gemm_tiled.comp", ["TM" = "4"], [F32, F16, S8, S16, S32, U8, U16, U32]);
numeric_family!(gemm_tiled8, "shaders/gemm_tiled.comp", ["TM" = "8"], [F32, F16, S8, S16, S32, U8, U16, U32]);
numeric_family!(gemm_tiled84, "shaders/gemm_tiled.comp", ["TM" = "8", "TN" = "4", "NTY" = "8", "BK" = "16"], [F32, F16, S8, S16, S32, U8, U16, U32]);
numeric_family!(gemm_tiled_tall, "shaders/gemm_tiled.comp", ["TM" = "8", "TN" = "4", "NTY" = "16", "BK" = "16"], [F32, F16, S8, S16, S32, U8, U16, U32]);
numeric_family!(gemm_conv, "shaders/gemm_tiled.comp", ["TM" = "4", "CONV" = "1"], [F32, F16]);
numeric_family!(gemm_conv8, "shaders/gemm_tiled.comp", ["TM" = "8", "CONV" = "1"], [F32, F16]);
numeric_family!(gemm_rows, "shaders/gemm_rows.comp", [], [F32, F32P, F64, F16, F16P, S8, S16, S32, S64, U8, U16, U32, U64]);
numeric_family!(gemm_rows4, "shaders/gemm_rows4.comp", [], [F32 + ["T4" = "vec4", "T4_BITS" = "uintBitsToFloat", "T4_UINT" = "floatBitsToUint"], F32P + ["T4" = "vec4", "T4_BITS" = "uintBitsToFloat", "T4_UINT" = "floatBitsToUint"], S32 + ["T4" = "ivec4", "T4_BITS" = "ivec4", "T4_UINT" = "uvec4"], U32 + ["T4" = "uvec4", "T4_BITS" = "uvec4", "T4_UINT" = "uvec4"]]);
numeric_family!(arg_reduce, "shaders/arg_reduce.comp", [], [F32, F64, F16, S8, S16, S32, S64, U8, U16, U32, U64]);
numeric_family!(classify, "shaders/classify.comp", [], [F32, F64, F16]);
numeric_family!(window, "shaders/window.comp", [], [F32, F32P, F64, F16, F16P, S8, S16, S32, S64, U8, U16, U32, U64]);
numeric_family!(sort, "shaders/sort.comp", [], [F32, F64, F16, S8, S16, S32, S64, U8, U16, U32, U64]);
numeric_family!(sort_bitonic, "shaders/sort_bitonic.comp", [], [F32, F64, F16, S8, S16, S32, S64, U8, U16, U32, U64]);
numeric_family!(scatter, "shaders/scatter.comp", [], [F32, F32P, F64, F16, F16P, S8, S16, S32, S64, U8, U16, U32, U64]);
numeric_family!(trisolve, "shaders/trisolve.comp", [], [F32, F32P, F64, F16]);
numeric_family!(window_scatter, "shaders/window_scatter.comp", [], [F32, F64, F16, S8, S16, S32, S64, U8, U16, U32, U64]);

kernels! {
    gemm_coop_f16 => "shaders/gemm_coop.comp", "T" = "float16_t";
    // bf16 GEMMs on the f16 tensor cores (ops/matmul.rs bf16_tensor_cores): the operands' scaled
    // f16 copies, the GEMM's f32 sums, their bf16 results, the outputs of lines f16 cannot hold.
    bf16_scale => "shaders/bf16_scale.comp";
    gemm_coop_f32out => "shaders/gemm_coop.comp", "T" = "float16_t", "F32_OUT" = "1";
    bf16_unscale => "shaders/bf16_unscale.comp";
    gemm_bf16_fixup => "shaders/gemm_bf16_fixup.comp";
    // Precise f32 unary ops on 16-byte vectors (ops/elementwise.rs says which ops take it).
    unary_f32p_v4 => "shaders/unary.comp", "T" = "float", "W" = "double", "PRECISE" = "1", "T4" = "vec4";
    // Radix sort of long rows (ops/reduce.rs radix_sort): keys of up to 32 bits, of 64 bits.
    sort_radix32 => "shaders/sort_radix.comp";
    sort_radix64 => "shaders/sort_radix.comp", "KEY64" = "1";

    select_b1 => "shaders/select.comp", "T" = "uint8_t";
    select_b2 => "shaders/select.comp", "T" = "uint16_t";
    select_b4 => "shaders/select.comp", "T" = "uint";
    select_b8 => "shaders/select.comp", "T" = "uint64_t";

    copy_b1 => "shaders/copy.comp", "T" = "uint8_t";
    copy_b2 => "shaders/copy.comp", "T" = "uint16_t";
    copy_b4 => "shaders/copy.comp", "T" = "uint";
    copy_b8 => "shaders/copy.comp", "T" = "uint64_t";
    copy_dynamic_b1 => "shaders/copy.comp", "T" = "uint8_t", "DYNAMIC_OFFSET" = "1";
    copy_dynamic_b2 => "shaders/copy.comp", "T" = "uint16_t", "DYNAMIC_OFFSET" = "1";
    copy_dynamic_b4 => "shaders/copy.comp", "T" = "uint", "DYNAMIC_OFFSET" = "1";
    copy_dynamic_b8 => "shaders/copy.comp", "T" = "uint64_t", "DYNAMIC_OFFSET" = "1";
    copy_starts_b1 => "shaders/copy.comp", "T" = "uint8_t", "STARTS" = "1";
    copy_starts_b2 => "shaders/copy.comp", "T" = "uint16_t", "STARTS" = "1";
    copy_starts_b4 => "shaders/copy.comp", "T" = "uint", "STARTS" = "1";
    copy_starts_b8 => "shaders/copy.comp", "T" = "uint64_t", "STARTS" = "1";
    dynamic_offset => "shaders/dynamic_offset.comp";
    copy_multi => "shaders/copy_multi.comp";
    copy_multi_gated => "shaders/copy_multi.comp", "GATED" = "1";

    fill_b1 => "shaders/fill.comp", "T" = "uint8_t", "ELEM_BYTES" = "1";
    fill_b2 => "shaders/fill.comp", "T" = "uint16_t", "ELEM_BYTES" = "2";
    fill_b4 => "shaders/fill.comp", "T" = "uint", "ELEM_BYTES" = "4";
    fill_b8 => "shaders/fill.comp", "T" = "uint64_t", "ELEM_BYTES" = "8";

    iota_f32 => "shaders/iota.comp", "T" = "float", "ROUND_BITS" = "24";
    iota_f64 => "shaders/iota.comp", "T" = "double";
    iota_f16 => "shaders/iota.comp", "T" = "float16_t", "ROUND_BITS" = "11";
    iota_s8 => "shaders/iota.comp", "T" = "int8_t";
    iota_s16 => "shaders/iota.comp", "T" = "int16_t";
    iota_s32 => "shaders/iota.comp", "T" = "int";
    iota_s64 => "shaders/iota.comp", "T" = "int64_t";
    iota_u8 => "shaders/iota.comp", "T" = "uint8_t";
    iota_u16 => "shaders/iota.comp", "T" = "uint16_t";
    iota_u32 => "shaders/iota.comp", "T" = "uint";
    iota_u64 => "shaders/iota.comp", "T" = "uint64_t";

    trisolve_c64 => "shaders/trisolve.comp", "T" = "vec2", "W" = "vec2", "COMPLEX" = "1";
    trisolve_c64p => "shaders/trisolve.comp", "T" = "vec2", "W" = "dvec2", "COMPLEX" = "1";
    trisolve_c128 => "shaders/trisolve.comp", "T" = "dvec2", "W" = "dvec2", "COMPLEX" = "1";

    complex_binary_c64 => "shaders/complex.comp", "T2" = "vec2", "BINARY" = "1";
    complex_binary_c128 => "shaders/complex.comp", "T2" = "dvec2", "BINARY" = "1";
    complex_compare_c64 => "shaders/complex.comp", "T2" = "vec2", "BINARY" = "1", "OUT_U8" = "1";
    complex_compare_c128 => "shaders/complex.comp", "T2" = "dvec2", "BINARY" = "1", "OUT_U8" = "1";
    complex_unary_c64 => "shaders/complex.comp", "T2" = "vec2";
    complex_unary_c128 => "shaders/complex.comp", "T2" = "dvec2";
    complex_real_c64 => "shaders/complex.comp", "T2" = "vec2", "R" = "float", "REAL_OUT" = "1";
    complex_real_c128 => "shaders/complex.comp", "T2" = "dvec2", "R" = "double", "REAL_OUT" = "1";

    gather_b1 => "shaders/gather.comp", "T" = "uint8_t";
    gather_b2 => "shaders/gather.comp", "T" = "uint16_t";
    gather_b4 => "shaders/gather.comp", "T" = "uint";
    gather_b8 => "shaders/gather.comp", "T" = "uint64_t";

    convert => "shaders/convert.comp";

    fft => "shaders/fft.comp";
}

/// Kernel families that come in one variant per numeric dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Unary,
    Binary,
    Compare,
    Reduce,
    ReduceColumns,
    ReduceSerial,
    Gemm,
    GemmKSplit,
    GemmTiled,
    GemmTiled8,
    GemmTiled84,
    GemmTiledTall,
    GemmConv,
    GemmConv8,
    GemmCoop,
    GemmRows,
    GemmRows4,
    ArgReduce,
    Classify,
    Window,
    Sort,
    SortBitonic,
    Scatter,
    TriSolve,
    WindowScatter,
}

/// The variant of `family` for `dtype`; `precise` picks the f64-computing variant of f32/f16 math
/// where the family has one (else the plain one). None: no variant for this dtype (bf16, complex,
/// sub-byte), so the op takes the host fallback.
pub fn numeric(family: Family, dtype: Dtype, precise: bool) -> Option<Kernel> {
    let variants = match family {
        Family::GemmCoop => return (dtype == Dtype::F16 && !precise).then_some(gemm_coop_f16),
        Family::TriSolve if dtype == Dtype::C64 => return Some(if precise { trisolve_c64p } else { trisolve_c64 }),
        Family::TriSolve if dtype == Dtype::C128 => return Some(trisolve_c128),
        Family::Unary => unary::VARIANTS,
        Family::Binary => binary::VARIANTS,
        Family::Compare => compare::VARIANTS,
        Family::Reduce => reduce::VARIANTS,
        Family::ReduceColumns => reduce_columns::VARIANTS,
        Family::ReduceSerial => reduce_serial::VARIANTS,
        Family::Gemm => gemm::VARIANTS,
        Family::GemmKSplit => gemm_ksplit::VARIANTS,
        Family::GemmTiled => gemm_tiled::VARIANTS,
        Family::GemmTiled8 => gemm_tiled8::VARIANTS,
        Family::GemmTiled84 => gemm_tiled84::VARIANTS,
        Family::GemmTiledTall => gemm_tiled_tall::VARIANTS,
        Family::GemmConv => gemm_conv::VARIANTS,
        Family::GemmConv8 => gemm_conv8::VARIANTS,
        Family::GemmRows => gemm_rows::VARIANTS,
        Family::GemmRows4 => gemm_rows4::VARIANTS,
        Family::ArgReduce => arg_reduce::VARIANTS,
        Family::Classify => classify::VARIANTS,
        Family::Window => window::VARIANTS,
        Family::Sort => sort::VARIANTS,
        Family::SortBitonic => sort_bitonic::VARIANTS,
        Family::Scatter => scatter::VARIANTS,
        Family::TriSolve => trisolve::VARIANTS,
        Family::WindowScatter => window_scatter::VARIANTS,
    };
    lookup(variants, dtype, precise)
}

/// The variant for (dtype, precise), else the dtype's plain one.
fn lookup(variants: &[(Dtype, bool, Kernel)], dtype: Dtype, precise: bool) -> Option<Kernel> {
    let find = |p: bool| variants.iter().find(|v| v.0 == dtype && v.1 == p).map(|v| v.2);
    find(precise).or_else(|| find(false))
}

/// Every kernel, for loading their modules ahead of use (pipelines::preload_modules). A family
/// missing here still works: its modules then load on first use.
pub fn all() -> impl Iterator<Item = Kernel> {
    let families: [&[(Dtype, bool, Kernel)]; 28] = [
        unary::VARIANTS,
        binary::VARIANTS,
        compare::VARIANTS,
        reduce::VARIANTS,
        reduce_out_acc::VARIANTS,
        reduce_in_acc::VARIANTS,
        reduce_columns::VARIANTS,
        reduce_columns_out_acc::VARIANTS,
        reduce_columns_in_acc::VARIANTS,
        reduce_serial::VARIANTS,
        gemm::VARIANTS,
        gemm_ksplit::VARIANTS,
        gemm_tiled::VARIANTS,
        gemm_tiled8::VARIANTS,
        gemm_tiled84::VARIANTS,
        gemm_tiled_tall::VARIANTS,
        gemm_conv::VARIANTS,
        gemm_conv8::VARIANTS,
        gemm_rows::VARIANTS,
        gemm_rows4::VARIANTS,
        arg_reduce::VARIANTS,
        classify::VARIANTS,
        window::VARIANTS,
        sort::VARIANTS,
        sort_bitonic::VARIANTS,
        scatter::VARIANTS,
        trisolve::VARIANTS,
        window_scatter::VARIANTS,
    ];
    families
        .into_iter()
        .flat_map(|variants| variants.iter().map(|v| v.2))
        .chain(STANDALONE.iter().copied())
}

/// The iota/eye variant for `dtype`.
pub fn iota(dtype: Dtype) -> Option<Kernel> {
    match dtype {
        Dtype::F32 => Some(iota_f32),
        Dtype::F64 => Some(iota_f64),
        Dtype::F16 => Some(iota_f16),
        Dtype::S8 => Some(iota_s8),
        Dtype::S16 => Some(iota_s16),
        Dtype::S32 => Some(iota_s32),
        Dtype::S64 => Some(iota_s64),
        Dtype::U8 => Some(iota_u8),
        Dtype::U16 => Some(iota_u16),
        Dtype::U32 => Some(iota_u32),
        Dtype::U64 => Some(iota_u64),
        _ => None,
    }
}

/// The passes of a split reduction for `dtype` whose accumulator differs from its storage type
/// (precise f32, f16): (first pass writing ACC partials, second pass reading them). Other dtypes
/// use the plain reduce variant for both passes.
pub fn split_reduce(dtype: Dtype, precise: bool) -> Option<(Kernel, Kernel)> {
    split_pair(reduce_out_acc::VARIANTS, reduce_in_acc::VARIANTS, dtype, precise)
}

/// The same for column reductions (reduce_columns.comp).
pub fn split_reduce_columns(dtype: Dtype, precise: bool) -> Option<(Kernel, Kernel)> {
    split_pair(reduce_columns_out_acc::VARIANTS, reduce_columns_in_acc::VARIANTS, dtype, precise)
}

fn split_pair(
    first: &[(Dtype, bool, Kernel)],
    second: &[(Dtype, bool, Kernel)],
    dtype: Dtype,
    precise: bool,
) -> Option<(Kernel, Kernel)> {
    let exact = |variants: &[(Dtype, bool, Kernel)]| variants.iter().find(|v| v.0 == dtype && v.1 == precise).map(|v| v.2);
    Some((exact(first)?, exact(second)?))
}
