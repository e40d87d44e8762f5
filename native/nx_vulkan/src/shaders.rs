//! Every shader variant, compiled from GLSL at build time by vulkano-shaders: one source per op
//! family, dtype variants by defines. Each line makes a module (the compiled SPIR-V) and a
//! `Kernel` constant of the same name that the pipeline cache loads on first use.
#![allow(non_upper_case_globals)]
use crate::dtype::Dtype;
use crate::pipelines::Kernel;

macro_rules! kernels {
    ($($variant:ident => $path:literal $(, $define:literal = $value:literal)*;)*) => {
        $(
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
                name: stringify!($variant),
                load: $variant::load,
                vectorized: defines_t4(&[$($define),*]),
            };
        )*
        /// Every kernel, for loading their modules ahead of use (pipelines::preload_modules).
        pub const ALL: &[Kernel] = &[$($variant),*];
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

kernels! {
    unary_f32 => "shaders/unary.comp", "T" = "float", "W" = "float", "T4" = "vec4";
    unary_f32p => "shaders/unary.comp", "T" = "float", "W" = "double", "PRECISE" = "1";
    unary_f64 => "shaders/unary.comp", "T" = "double", "W" = "double", "IS_F64" = "1";
    unary_f16 => "shaders/unary.comp", "T" = "float16_t", "W" = "float";
    unary_f16p => "shaders/unary.comp", "T" = "float16_t", "W" = "double", "PRECISE" = "1";
    unary_s8 => "shaders/unary.comp", "T" = "int8_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "8", "T_MIN" = "(-128)", "T_MAX" = "127";
    unary_s16 => "shaders/unary.comp", "T" = "int16_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "16", "T_MIN" = "(-32768)", "T_MAX" = "32767";
    unary_s32 => "shaders/unary.comp", "T" = "int", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "32", "T_MIN" = "(-2147483647 - 1)", "T_MAX" = "2147483647";
    unary_s64 => "shaders/unary.comp", "T" = "int64_t", "W" = "int64_t", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "64", "T_MIN" = "(int64_t(1) << 63)", "T_MAX" = "(~(int64_t(1) << 63))";
    unary_u8 => "shaders/unary.comp", "T" = "uint8_t", "W" = "uint", "IS_INT" = "1", "BITS" = "8", "T_MIN" = "0u", "T_MAX" = "255u";
    unary_u16 => "shaders/unary.comp", "T" = "uint16_t", "W" = "uint", "IS_INT" = "1", "BITS" = "16", "T_MIN" = "0u", "T_MAX" = "65535u";
    unary_u32 => "shaders/unary.comp", "T" = "uint", "W" = "uint", "IS_INT" = "1", "BITS" = "32", "T_MIN" = "0u", "T_MAX" = "4294967295u";
    unary_u64 => "shaders/unary.comp", "T" = "uint64_t", "W" = "uint64_t", "IS_INT" = "1", "BITS" = "64", "T_MIN" = "uint64_t(0)", "T_MAX" = "(~uint64_t(0))";

    binary_f32 => "shaders/binary.comp", "T" = "float", "W" = "float", "T4" = "vec4";
    binary_f32p => "shaders/binary.comp", "T" = "float", "W" = "double", "PRECISE" = "1", "T4" = "vec4";
    binary_f64 => "shaders/binary.comp", "T" = "double", "W" = "double", "IS_F64" = "1";
    binary_f16 => "shaders/binary.comp", "T" = "float16_t", "W" = "float";
    binary_f16p => "shaders/binary.comp", "T" = "float16_t", "W" = "double", "PRECISE" = "1";
    binary_s8 => "shaders/binary.comp", "T" = "int8_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "8", "T_MIN" = "(-128)", "T_MAX" = "127";
    binary_s16 => "shaders/binary.comp", "T" = "int16_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "16", "T_MIN" = "(-32768)", "T_MAX" = "32767";
    binary_s32 => "shaders/binary.comp", "T" = "int", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "32", "T_MIN" = "(-2147483647 - 1)", "T_MAX" = "2147483647";
    binary_s64 => "shaders/binary.comp", "T" = "int64_t", "W" = "int64_t", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "64", "T_MIN" = "(int64_t(1) << 63)", "T_MAX" = "(~(int64_t(1) << 63))";
    binary_u8 => "shaders/binary.comp", "T" = "uint8_t", "W" = "uint", "IS_INT" = "1", "BITS" = "8", "T_MIN" = "0u", "T_MAX" = "255u";
    binary_u16 => "shaders/binary.comp", "T" = "uint16_t", "W" = "uint", "IS_INT" = "1", "BITS" = "16", "T_MIN" = "0u", "T_MAX" = "65535u";
    binary_u32 => "shaders/binary.comp", "T" = "uint", "W" = "uint", "IS_INT" = "1", "BITS" = "32", "T_MIN" = "0u", "T_MAX" = "4294967295u";
    binary_u64 => "shaders/binary.comp", "T" = "uint64_t", "W" = "uint64_t", "IS_INT" = "1", "BITS" = "64", "T_MIN" = "uint64_t(0)", "T_MAX" = "(~uint64_t(0))";

    compare_f32 => "shaders/binary.comp", "T" = "float", "W" = "float", "OUT_U8" = "1";
    compare_f64 => "shaders/binary.comp", "T" = "double", "W" = "double", "IS_F64" = "1", "OUT_U8" = "1";
    compare_f16 => "shaders/binary.comp", "T" = "float16_t", "W" = "float", "OUT_U8" = "1";
    compare_s8 => "shaders/binary.comp", "T" = "int8_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "8", "T_MIN" = "(-128)", "T_MAX" = "127", "OUT_U8" = "1";
    compare_s16 => "shaders/binary.comp", "T" = "int16_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "16", "T_MIN" = "(-32768)", "T_MAX" = "32767", "OUT_U8" = "1";
    compare_s32 => "shaders/binary.comp", "T" = "int", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "32", "T_MIN" = "(-2147483647 - 1)", "T_MAX" = "2147483647", "OUT_U8" = "1";
    compare_s64 => "shaders/binary.comp", "T" = "int64_t", "W" = "int64_t", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "64", "T_MIN" = "(int64_t(1) << 63)", "T_MAX" = "(~(int64_t(1) << 63))", "OUT_U8" = "1";
    compare_u8 => "shaders/binary.comp", "T" = "uint8_t", "W" = "uint", "IS_INT" = "1", "BITS" = "8", "T_MIN" = "0u", "T_MAX" = "255u", "OUT_U8" = "1";
    compare_u16 => "shaders/binary.comp", "T" = "uint16_t", "W" = "uint", "IS_INT" = "1", "BITS" = "16", "T_MIN" = "0u", "T_MAX" = "65535u", "OUT_U8" = "1";
    compare_u32 => "shaders/binary.comp", "T" = "uint", "W" = "uint", "IS_INT" = "1", "BITS" = "32", "T_MIN" = "0u", "T_MAX" = "4294967295u", "OUT_U8" = "1";
    compare_u64 => "shaders/binary.comp", "T" = "uint64_t", "W" = "uint64_t", "IS_INT" = "1", "BITS" = "64", "T_MIN" = "uint64_t(0)", "T_MAX" = "(~uint64_t(0))", "OUT_U8" = "1";

    reduce_f32 => "shaders/reduce.comp", "T" = "float", "W" = "float", "ACC" = "float";
    reduce_f32p => "shaders/reduce.comp", "T" = "float", "W" = "double", "PRECISE" = "1", "ACC" = "double";
    reduce_f64 => "shaders/reduce.comp", "T" = "double", "W" = "double", "IS_F64" = "1", "ACC" = "double";
    reduce_f16 => "shaders/reduce.comp", "T" = "float16_t", "W" = "float", "ACC" = "float";
    reduce_f16p => "shaders/reduce.comp", "T" = "float16_t", "W" = "double", "PRECISE" = "1", "ACC" = "double";
    reduce_s8 => "shaders/reduce.comp", "T" = "int8_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "8", "T_MIN" = "(-128)", "T_MAX" = "127", "ACC" = "int";
    reduce_s16 => "shaders/reduce.comp", "T" = "int16_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "16", "T_MIN" = "(-32768)", "T_MAX" = "32767", "ACC" = "int";
    reduce_s32 => "shaders/reduce.comp", "T" = "int", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "32", "T_MIN" = "(-2147483647 - 1)", "T_MAX" = "2147483647", "ACC" = "int";
    reduce_s64 => "shaders/reduce.comp", "T" = "int64_t", "W" = "int64_t", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "64", "T_MIN" = "(int64_t(1) << 63)", "T_MAX" = "(~(int64_t(1) << 63))", "ACC" = "int64_t";
    reduce_u8 => "shaders/reduce.comp", "T" = "uint8_t", "W" = "uint", "IS_INT" = "1", "BITS" = "8", "T_MIN" = "0u", "T_MAX" = "255u", "ACC" = "uint";
    reduce_u16 => "shaders/reduce.comp", "T" = "uint16_t", "W" = "uint", "IS_INT" = "1", "BITS" = "16", "T_MIN" = "0u", "T_MAX" = "65535u", "ACC" = "uint";
    reduce_u32 => "shaders/reduce.comp", "T" = "uint", "W" = "uint", "IS_INT" = "1", "BITS" = "32", "T_MIN" = "0u", "T_MAX" = "4294967295u", "ACC" = "uint";
    reduce_u64 => "shaders/reduce.comp", "T" = "uint64_t", "W" = "uint64_t", "IS_INT" = "1", "BITS" = "64", "T_MIN" = "uint64_t(0)", "T_MAX" = "(~uint64_t(0))", "ACC" = "uint64_t";
    reduce_columns_f32 => "shaders/reduce_columns.comp", "T" = "float", "W" = "float", "ACC" = "float";
    reduce_columns_f32p => "shaders/reduce_columns.comp", "T" = "float", "W" = "double", "PRECISE" = "1", "ACC" = "double";
    reduce_columns_f64 => "shaders/reduce_columns.comp", "T" = "double", "W" = "double", "IS_F64" = "1", "ACC" = "double";
    reduce_columns_f16 => "shaders/reduce_columns.comp", "T" = "float16_t", "W" = "float", "ACC" = "float";
    reduce_columns_f16p => "shaders/reduce_columns.comp", "T" = "float16_t", "W" = "double", "PRECISE" = "1", "ACC" = "double";
    reduce_columns_s8 => "shaders/reduce_columns.comp", "T" = "int8_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "8", "T_MIN" = "(-128)", "T_MAX" = "127", "ACC" = "int";
    reduce_columns_s16 => "shaders/reduce_columns.comp", "T" = "int16_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "16", "T_MIN" = "(-32768)", "T_MAX" = "32767", "ACC" = "int";
    reduce_columns_s32 => "shaders/reduce_columns.comp", "T" = "int", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "32", "T_MIN" = "(-2147483647 - 1)", "T_MAX" = "2147483647", "ACC" = "int";
    reduce_columns_s64 => "shaders/reduce_columns.comp", "T" = "int64_t", "W" = "int64_t", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "64", "T_MIN" = "(int64_t(1) << 63)", "T_MAX" = "(~(int64_t(1) << 63))", "ACC" = "int64_t";
    reduce_columns_u8 => "shaders/reduce_columns.comp", "T" = "uint8_t", "W" = "uint", "IS_INT" = "1", "BITS" = "8", "T_MIN" = "0u", "T_MAX" = "255u", "ACC" = "uint";
    reduce_columns_u16 => "shaders/reduce_columns.comp", "T" = "uint16_t", "W" = "uint", "IS_INT" = "1", "BITS" = "16", "T_MIN" = "0u", "T_MAX" = "65535u", "ACC" = "uint";
    reduce_columns_u32 => "shaders/reduce_columns.comp", "T" = "uint", "W" = "uint", "IS_INT" = "1", "BITS" = "32", "T_MIN" = "0u", "T_MAX" = "4294967295u", "ACC" = "uint";
    reduce_columns_u64 => "shaders/reduce_columns.comp", "T" = "uint64_t", "W" = "uint64_t", "IS_INT" = "1", "BITS" = "64", "T_MIN" = "uint64_t(0)", "T_MAX" = "(~uint64_t(0))", "ACC" = "uint64_t";

    reduce_serial_f32 => "shaders/reduce_serial.comp", "T" = "float", "W" = "float", "ACC" = "float";
    reduce_serial_f32p => "shaders/reduce_serial.comp", "T" = "float", "W" = "double", "PRECISE" = "1", "ACC" = "double";
    reduce_serial_f64 => "shaders/reduce_serial.comp", "T" = "double", "W" = "double", "IS_F64" = "1", "ACC" = "double";
    reduce_serial_f16 => "shaders/reduce_serial.comp", "T" = "float16_t", "W" = "float", "ACC" = "float";
    reduce_serial_f16p => "shaders/reduce_serial.comp", "T" = "float16_t", "W" = "double", "PRECISE" = "1", "ACC" = "double";
    reduce_serial_s8 => "shaders/reduce_serial.comp", "T" = "int8_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "8", "T_MIN" = "(-128)", "T_MAX" = "127", "ACC" = "int";
    reduce_serial_s16 => "shaders/reduce_serial.comp", "T" = "int16_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "16", "T_MIN" = "(-32768)", "T_MAX" = "32767", "ACC" = "int";
    reduce_serial_s32 => "shaders/reduce_serial.comp", "T" = "int", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "32", "T_MIN" = "(-2147483647 - 1)", "T_MAX" = "2147483647", "ACC" = "int";
    reduce_serial_s64 => "shaders/reduce_serial.comp", "T" = "int64_t", "W" = "int64_t", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "64", "T_MIN" = "(int64_t(1) << 63)", "T_MAX" = "(~(int64_t(1) << 63))", "ACC" = "int64_t";
    reduce_serial_u8 => "shaders/reduce_serial.comp", "T" = "uint8_t", "W" = "uint", "IS_INT" = "1", "BITS" = "8", "T_MIN" = "0u", "T_MAX" = "255u", "ACC" = "uint";
    reduce_serial_u16 => "shaders/reduce_serial.comp", "T" = "uint16_t", "W" = "uint", "IS_INT" = "1", "BITS" = "16", "T_MIN" = "0u", "T_MAX" = "65535u", "ACC" = "uint";
    reduce_serial_u32 => "shaders/reduce_serial.comp", "T" = "uint", "W" = "uint", "IS_INT" = "1", "BITS" = "32", "T_MIN" = "0u", "T_MAX" = "4294967295u", "ACC" = "uint";
    reduce_serial_u64 => "shaders/reduce_serial.comp", "T" = "uint64_t", "W" = "uint64_t", "IS_INT" = "1", "BITS" = "64", "T_MIN" = "uint64_t(0)", "T_MAX" = "(~uint64_t(0))", "ACC" = "uint64_t";

    gemm_f32 => "shaders/gemm.comp", "T" = "float", "W" = "float";
    gemm_f32p => "shaders/gemm.comp", "T" = "float", "W" = "double", "PRECISE" = "1";
    gemm_f64 => "shaders/gemm.comp", "T" = "double", "W" = "double", "IS_F64" = "1";
    gemm_f16 => "shaders/gemm.comp", "T" = "float16_t", "W" = "float";
    gemm_f16p => "shaders/gemm.comp", "T" = "float16_t", "W" = "double", "PRECISE" = "1";
    gemm_s8 => "shaders/gemm.comp", "T" = "int8_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "8", "T_MIN" = "(-128)", "T_MAX" = "127";
    gemm_s16 => "shaders/gemm.comp", "T" = "int16_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "16", "T_MIN" = "(-32768)", "T_MAX" = "32767";
    gemm_s32 => "shaders/gemm.comp", "T" = "int", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "32", "T_MIN" = "(-2147483647 - 1)", "T_MAX" = "2147483647";
    gemm_s64 => "shaders/gemm.comp", "T" = "int64_t", "W" = "int64_t", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "64", "T_MIN" = "(int64_t(1) << 63)", "T_MAX" = "(~(int64_t(1) << 63))";
    gemm_u8 => "shaders/gemm.comp", "T" = "uint8_t", "W" = "uint", "IS_INT" = "1", "BITS" = "8", "T_MIN" = "0u", "T_MAX" = "255u";
    gemm_u16 => "shaders/gemm.comp", "T" = "uint16_t", "W" = "uint", "IS_INT" = "1", "BITS" = "16", "T_MIN" = "0u", "T_MAX" = "65535u";
    gemm_u32 => "shaders/gemm.comp", "T" = "uint", "W" = "uint", "IS_INT" = "1", "BITS" = "32", "T_MIN" = "0u", "T_MAX" = "4294967295u";
    gemm_u64 => "shaders/gemm.comp", "T" = "uint64_t", "W" = "uint64_t", "IS_INT" = "1", "BITS" = "64", "T_MIN" = "uint64_t(0)", "T_MAX" = "(~uint64_t(0))";
    gemm_coop_f16 => "shaders/gemm_coop.comp", "T" = "float16_t";
    gemm_tiled_f32 => "shaders/gemm_tiled.comp", "T" = "float", "W" = "float", "TM" = "4";
    gemm_tiled8_f32 => "shaders/gemm_tiled.comp", "T" = "float", "W" = "float", "TM" = "8";
    gemm_tiled_f16 => "shaders/gemm_tiled.comp", "T" = "float16_t", "W" = "float", "TM" = "4";
    gemm_tiled8_f16 => "shaders/gemm_tiled.comp", "T" = "float16_t", "W" = "float", "TM" = "8";
    gemm_tiled_s8 => "shaders/gemm_tiled.comp", "T" = "int8_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "8", "T_MIN" = "(-128)", "T_MAX" = "127", "TM" = "4";
    gemm_tiled8_s8 => "shaders/gemm_tiled.comp", "T" = "int8_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "8", "T_MIN" = "(-128)", "T_MAX" = "127", "TM" = "8";
    gemm_tiled_s16 => "shaders/gemm_tiled.comp", "T" = "int16_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "16", "T_MIN" = "(-32768)", "T_MAX" = "32767", "TM" = "4";
    gemm_tiled8_s16 => "shaders/gemm_tiled.comp", "T" = "int16_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "16", "T_MIN" = "(-32768)", "T_MAX" = "32767", "TM" = "8";
    gemm_tiled_s32 => "shaders/gemm_tiled.comp", "T" = "int", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "32", "T_MIN" = "(-2147483647 - 1)", "T_MAX" = "2147483647", "TM" = "4";
    gemm_tiled8_s32 => "shaders/gemm_tiled.comp", "T" = "int", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "32", "T_MIN" = "(-2147483647 - 1)", "T_MAX" = "2147483647", "TM" = "8";
    gemm_tiled_u8 => "shaders/gemm_tiled.comp", "T" = "uint8_t", "W" = "uint", "IS_INT" = "1", "BITS" = "8", "T_MIN" = "0u", "T_MAX" = "255u", "TM" = "4";
    gemm_tiled8_u8 => "shaders/gemm_tiled.comp", "T" = "uint8_t", "W" = "uint", "IS_INT" = "1", "BITS" = "8", "T_MIN" = "0u", "T_MAX" = "255u", "TM" = "8";
    gemm_tiled_u16 => "shaders/gemm_tiled.comp", "T" = "uint16_t", "W" = "uint", "IS_INT" = "1", "BITS" = "16", "T_MIN" = "0u", "T_MAX" = "65535u", "TM" = "4";
    gemm_tiled8_u16 => "shaders/gemm_tiled.comp", "T" = "uint16_t", "W" = "uint", "IS_INT" = "1", "BITS" = "16", "T_MIN" = "0u", "T_MAX" = "65535u", "TM" = "8";
    gemm_tiled_u32 => "shaders/gemm_tiled.comp", "T" = "uint", "W" = "uint", "IS_INT" = "1", "BITS" = "32", "T_MIN" = "0u", "T_MAX" = "4294967295u", "TM" = "4";
    gemm_tiled8_u32 => "shaders/gemm_tiled.comp", "T" = "uint", "W" = "uint", "IS_INT" = "1", "BITS" = "32", "T_MIN" = "0u", "T_MAX" = "4294967295u", "TM" = "8";

    gemm_rows_f32 => "shaders/gemm_rows.comp", "T" = "float", "W" = "float";
    gemm_rows_f32p => "shaders/gemm_rows.comp", "T" = "float", "W" = "double", "PRECISE" = "1";
    gemm_rows_f64 => "shaders/gemm_rows.comp", "T" = "double", "W" = "double", "IS_F64" = "1";
    gemm_rows_f16 => "shaders/gemm_rows.comp", "T" = "float16_t", "W" = "float";
    gemm_rows_f16p => "shaders/gemm_rows.comp", "T" = "float16_t", "W" = "double", "PRECISE" = "1";
    gemm_rows_s8 => "shaders/gemm_rows.comp", "T" = "int8_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "8", "T_MIN" = "(-128)", "T_MAX" = "127";
    gemm_rows_s16 => "shaders/gemm_rows.comp", "T" = "int16_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "16", "T_MIN" = "(-32768)", "T_MAX" = "32767";
    gemm_rows_s32 => "shaders/gemm_rows.comp", "T" = "int", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "32", "T_MIN" = "(-2147483647 - 1)", "T_MAX" = "2147483647";
    gemm_rows_s64 => "shaders/gemm_rows.comp", "T" = "int64_t", "W" = "int64_t", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "64", "T_MIN" = "(int64_t(1) << 63)", "T_MAX" = "(~(int64_t(1) << 63))";
    gemm_rows_u8 => "shaders/gemm_rows.comp", "T" = "uint8_t", "W" = "uint", "IS_INT" = "1", "BITS" = "8", "T_MIN" = "0u", "T_MAX" = "255u";
    gemm_rows_u16 => "shaders/gemm_rows.comp", "T" = "uint16_t", "W" = "uint", "IS_INT" = "1", "BITS" = "16", "T_MIN" = "0u", "T_MAX" = "65535u";
    gemm_rows_u32 => "shaders/gemm_rows.comp", "T" = "uint", "W" = "uint", "IS_INT" = "1", "BITS" = "32", "T_MIN" = "0u", "T_MAX" = "4294967295u";
    gemm_rows_u64 => "shaders/gemm_rows.comp", "T" = "uint64_t", "W" = "uint64_t", "IS_INT" = "1", "BITS" = "64", "T_MIN" = "uint64_t(0)", "T_MAX" = "(~uint64_t(0))";

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
    dynamic_offset => "shaders/dynamic_offset.comp";

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

    arg_reduce_f32 => "shaders/arg_reduce.comp", "T" = "float", "W" = "float";
    arg_reduce_f64 => "shaders/arg_reduce.comp", "T" = "double", "W" = "double", "IS_F64" = "1";
    arg_reduce_f16 => "shaders/arg_reduce.comp", "T" = "float16_t", "W" = "float";
    arg_reduce_s8 => "shaders/arg_reduce.comp", "T" = "int8_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "8", "T_MIN" = "(-128)", "T_MAX" = "127";
    arg_reduce_s16 => "shaders/arg_reduce.comp", "T" = "int16_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "16", "T_MIN" = "(-32768)", "T_MAX" = "32767";
    arg_reduce_s32 => "shaders/arg_reduce.comp", "T" = "int", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "32", "T_MIN" = "(-2147483647 - 1)", "T_MAX" = "2147483647";
    arg_reduce_s64 => "shaders/arg_reduce.comp", "T" = "int64_t", "W" = "int64_t", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "64", "T_MIN" = "(int64_t(1) << 63)", "T_MAX" = "(~(int64_t(1) << 63))";
    arg_reduce_u8 => "shaders/arg_reduce.comp", "T" = "uint8_t", "W" = "uint", "IS_INT" = "1", "BITS" = "8", "T_MIN" = "0u", "T_MAX" = "255u";
    arg_reduce_u16 => "shaders/arg_reduce.comp", "T" = "uint16_t", "W" = "uint", "IS_INT" = "1", "BITS" = "16", "T_MIN" = "0u", "T_MAX" = "65535u";
    arg_reduce_u32 => "shaders/arg_reduce.comp", "T" = "uint", "W" = "uint", "IS_INT" = "1", "BITS" = "32", "T_MIN" = "0u", "T_MAX" = "4294967295u";
    arg_reduce_u64 => "shaders/arg_reduce.comp", "T" = "uint64_t", "W" = "uint64_t", "IS_INT" = "1", "BITS" = "64", "T_MIN" = "uint64_t(0)", "T_MAX" = "(~uint64_t(0))";

    classify_f32 => "shaders/classify.comp", "T" = "float", "W" = "float";
    classify_f64 => "shaders/classify.comp", "T" = "double", "W" = "double";
    classify_f16 => "shaders/classify.comp", "T" = "float16_t", "W" = "float";

    window_f32 => "shaders/window.comp", "T" = "float", "W" = "float", "ACC" = "float";
    window_f32p => "shaders/window.comp", "T" = "float", "W" = "double", "PRECISE" = "1", "ACC" = "double";
    window_f64 => "shaders/window.comp", "T" = "double", "W" = "double", "IS_F64" = "1", "ACC" = "double";
    window_f16 => "shaders/window.comp", "T" = "float16_t", "W" = "float", "ACC" = "float";
    window_f16p => "shaders/window.comp", "T" = "float16_t", "W" = "double", "PRECISE" = "1", "ACC" = "double";
    window_s8 => "shaders/window.comp", "T" = "int8_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "8", "T_MIN" = "(-128)", "T_MAX" = "127", "ACC" = "int";
    window_s16 => "shaders/window.comp", "T" = "int16_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "16", "T_MIN" = "(-32768)", "T_MAX" = "32767", "ACC" = "int";
    window_s32 => "shaders/window.comp", "T" = "int", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "32", "T_MIN" = "(-2147483647 - 1)", "T_MAX" = "2147483647", "ACC" = "int";
    window_s64 => "shaders/window.comp", "T" = "int64_t", "W" = "int64_t", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "64", "T_MIN" = "(int64_t(1) << 63)", "T_MAX" = "(~(int64_t(1) << 63))", "ACC" = "int64_t";
    window_u8 => "shaders/window.comp", "T" = "uint8_t", "W" = "uint", "IS_INT" = "1", "BITS" = "8", "T_MIN" = "0u", "T_MAX" = "255u", "ACC" = "uint";
    window_u16 => "shaders/window.comp", "T" = "uint16_t", "W" = "uint", "IS_INT" = "1", "BITS" = "16", "T_MIN" = "0u", "T_MAX" = "65535u", "ACC" = "uint";
    window_u32 => "shaders/window.comp", "T" = "uint", "W" = "uint", "IS_INT" = "1", "BITS" = "32", "T_MIN" = "0u", "T_MAX" = "4294967295u", "ACC" = "uint";
    window_u64 => "shaders/window.comp", "T" = "uint64_t", "W" = "uint64_t", "IS_INT" = "1", "BITS" = "64", "T_MIN" = "uint64_t(0)", "T_MAX" = "(~uint64_t(0))", "ACC" = "uint64_t";

    sort_f32 => "shaders/sort.comp", "T" = "float", "W" = "float";
    sort_f64 => "shaders/sort.comp", "T" = "double", "W" = "double", "IS_F64" = "1";
    sort_f16 => "shaders/sort.comp", "T" = "float16_t", "W" = "float";
    sort_s8 => "shaders/sort.comp", "T" = "int8_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "8", "T_MIN" = "(-128)", "T_MAX" = "127";
    sort_s16 => "shaders/sort.comp", "T" = "int16_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "16", "T_MIN" = "(-32768)", "T_MAX" = "32767";
    sort_s32 => "shaders/sort.comp", "T" = "int", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "32", "T_MIN" = "(-2147483647 - 1)", "T_MAX" = "2147483647";
    sort_s64 => "shaders/sort.comp", "T" = "int64_t", "W" = "int64_t", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "64", "T_MIN" = "(int64_t(1) << 63)", "T_MAX" = "(~(int64_t(1) << 63))";
    sort_u8 => "shaders/sort.comp", "T" = "uint8_t", "W" = "uint", "IS_INT" = "1", "BITS" = "8", "T_MIN" = "0u", "T_MAX" = "255u";
    sort_u16 => "shaders/sort.comp", "T" = "uint16_t", "W" = "uint", "IS_INT" = "1", "BITS" = "16", "T_MIN" = "0u", "T_MAX" = "65535u";
    sort_u32 => "shaders/sort.comp", "T" = "uint", "W" = "uint", "IS_INT" = "1", "BITS" = "32", "T_MIN" = "0u", "T_MAX" = "4294967295u";
    sort_u64 => "shaders/sort.comp", "T" = "uint64_t", "W" = "uint64_t", "IS_INT" = "1", "BITS" = "64", "T_MIN" = "uint64_t(0)", "T_MAX" = "(~uint64_t(0))";
    sort_bitonic_f32 => "shaders/sort_bitonic.comp", "T" = "float", "W" = "float";
    sort_bitonic_f64 => "shaders/sort_bitonic.comp", "T" = "double", "W" = "double", "IS_F64" = "1";
    sort_bitonic_f16 => "shaders/sort_bitonic.comp", "T" = "float16_t", "W" = "float";
    sort_bitonic_s8 => "shaders/sort_bitonic.comp", "T" = "int8_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "8", "T_MIN" = "(-128)", "T_MAX" = "127";
    sort_bitonic_s16 => "shaders/sort_bitonic.comp", "T" = "int16_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "16", "T_MIN" = "(-32768)", "T_MAX" = "32767";
    sort_bitonic_s32 => "shaders/sort_bitonic.comp", "T" = "int", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "32", "T_MIN" = "(-2147483647 - 1)", "T_MAX" = "2147483647";
    sort_bitonic_s64 => "shaders/sort_bitonic.comp", "T" = "int64_t", "W" = "int64_t", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "64", "T_MIN" = "(int64_t(1) << 63)", "T_MAX" = "(~(int64_t(1) << 63))";
    sort_bitonic_u8 => "shaders/sort_bitonic.comp", "T" = "uint8_t", "W" = "uint", "IS_INT" = "1", "BITS" = "8", "T_MIN" = "0u", "T_MAX" = "255u";
    sort_bitonic_u16 => "shaders/sort_bitonic.comp", "T" = "uint16_t", "W" = "uint", "IS_INT" = "1", "BITS" = "16", "T_MIN" = "0u", "T_MAX" = "65535u";
    sort_bitonic_u32 => "shaders/sort_bitonic.comp", "T" = "uint", "W" = "uint", "IS_INT" = "1", "BITS" = "32", "T_MIN" = "0u", "T_MAX" = "4294967295u";
    sort_bitonic_u64 => "shaders/sort_bitonic.comp", "T" = "uint64_t", "W" = "uint64_t", "IS_INT" = "1", "BITS" = "64", "T_MIN" = "uint64_t(0)", "T_MAX" = "(~uint64_t(0))";

    scatter_f32 => "shaders/scatter.comp", "T" = "float", "W" = "float";
    scatter_f32p => "shaders/scatter.comp", "T" = "float", "W" = "double", "PRECISE" = "1";
    scatter_f64 => "shaders/scatter.comp", "T" = "double", "W" = "double", "IS_F64" = "1";
    scatter_f16 => "shaders/scatter.comp", "T" = "float16_t", "W" = "float";
    scatter_f16p => "shaders/scatter.comp", "T" = "float16_t", "W" = "double", "PRECISE" = "1";
    scatter_s8 => "shaders/scatter.comp", "T" = "int8_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "8", "T_MIN" = "(-128)", "T_MAX" = "127";
    scatter_s16 => "shaders/scatter.comp", "T" = "int16_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "16", "T_MIN" = "(-32768)", "T_MAX" = "32767";
    scatter_s32 => "shaders/scatter.comp", "T" = "int", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "32", "T_MIN" = "(-2147483647 - 1)", "T_MAX" = "2147483647";
    scatter_s64 => "shaders/scatter.comp", "T" = "int64_t", "W" = "int64_t", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "64", "T_MIN" = "(int64_t(1) << 63)", "T_MAX" = "(~(int64_t(1) << 63))";
    scatter_u8 => "shaders/scatter.comp", "T" = "uint8_t", "W" = "uint", "IS_INT" = "1", "BITS" = "8", "T_MIN" = "0u", "T_MAX" = "255u";
    scatter_u16 => "shaders/scatter.comp", "T" = "uint16_t", "W" = "uint", "IS_INT" = "1", "BITS" = "16", "T_MIN" = "0u", "T_MAX" = "65535u";
    scatter_u32 => "shaders/scatter.comp", "T" = "uint", "W" = "uint", "IS_INT" = "1", "BITS" = "32", "T_MIN" = "0u", "T_MAX" = "4294967295u";
    scatter_u64 => "shaders/scatter.comp", "T" = "uint64_t", "W" = "uint64_t", "IS_INT" = "1", "BITS" = "64", "T_MIN" = "uint64_t(0)", "T_MAX" = "(~uint64_t(0))";

    trisolve_f32 => "shaders/trisolve.comp", "T" = "float", "W" = "float";
    trisolve_f32p => "shaders/trisolve.comp", "T" = "float", "W" = "double";
    trisolve_f64 => "shaders/trisolve.comp", "T" = "double", "W" = "double";
    trisolve_f16 => "shaders/trisolve.comp", "T" = "float16_t", "W" = "float";
    trisolve_c64 => "shaders/trisolve.comp", "T" = "vec2", "W" = "vec2", "COMPLEX" = "1";
    trisolve_c64p => "shaders/trisolve.comp", "T" = "vec2", "W" = "dvec2", "COMPLEX" = "1";
    trisolve_c128 => "shaders/trisolve.comp", "T" = "dvec2", "W" = "dvec2", "COMPLEX" = "1";

    window_scatter_f32 => "shaders/window_scatter.comp", "T" = "float", "W" = "float";
    window_scatter_f64 => "shaders/window_scatter.comp", "T" = "double", "W" = "double", "IS_F64" = "1";
    window_scatter_f16 => "shaders/window_scatter.comp", "T" = "float16_t", "W" = "float";
    window_scatter_s8 => "shaders/window_scatter.comp", "T" = "int8_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "8", "T_MIN" = "(-128)", "T_MAX" = "127";
    window_scatter_s16 => "shaders/window_scatter.comp", "T" = "int16_t", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "16", "T_MIN" = "(-32768)", "T_MAX" = "32767";
    window_scatter_s32 => "shaders/window_scatter.comp", "T" = "int", "W" = "int", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "32", "T_MIN" = "(-2147483647 - 1)", "T_MAX" = "2147483647";
    window_scatter_s64 => "shaders/window_scatter.comp", "T" = "int64_t", "W" = "int64_t", "IS_INT" = "1", "IS_SIGNED" = "1", "BITS" = "64", "T_MIN" = "(int64_t(1) << 63)", "T_MAX" = "(~(int64_t(1) << 63))";
    window_scatter_u8 => "shaders/window_scatter.comp", "T" = "uint8_t", "W" = "uint", "IS_INT" = "1", "BITS" = "8", "T_MIN" = "0u", "T_MAX" = "255u";
    window_scatter_u16 => "shaders/window_scatter.comp", "T" = "uint16_t", "W" = "uint", "IS_INT" = "1", "BITS" = "16", "T_MIN" = "0u", "T_MAX" = "65535u";
    window_scatter_u32 => "shaders/window_scatter.comp", "T" = "uint", "W" = "uint", "IS_INT" = "1", "BITS" = "32", "T_MIN" = "0u", "T_MAX" = "4294967295u";
    window_scatter_u64 => "shaders/window_scatter.comp", "T" = "uint64_t", "W" = "uint64_t", "IS_INT" = "1", "BITS" = "64", "T_MIN" = "uint64_t(0)", "T_MAX" = "(~uint64_t(0))";

    reduce_out_acc_f32p => "shaders/reduce.comp", "T" = "float", "W" = "double", "PRECISE" = "1", "ACC" = "double", "OUT_ACC" = "1";
    reduce_in_acc_f32p => "shaders/reduce.comp", "T" = "float", "W" = "double", "PRECISE" = "1", "ACC" = "double", "IN_ACC" = "1";
    reduce_out_acc_f16 => "shaders/reduce.comp", "T" = "float16_t", "W" = "float", "ACC" = "float", "OUT_ACC" = "1";
    reduce_in_acc_f16 => "shaders/reduce.comp", "T" = "float16_t", "W" = "float", "ACC" = "float", "IN_ACC" = "1";
    reduce_out_acc_f16p => "shaders/reduce.comp", "T" = "float16_t", "W" = "double", "PRECISE" = "1", "ACC" = "double", "OUT_ACC" = "1";
    reduce_in_acc_f16p => "shaders/reduce.comp", "T" = "float16_t", "W" = "double", "PRECISE" = "1", "ACC" = "double", "IN_ACC" = "1";

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
    GemmTiled,
    GemmTiled8,
    GemmCoop,
    GemmRows,
    ArgReduce,
    Classify,
    Window,
    Sort,
    SortBitonic,
    Scatter,
    TriSolve,
    WindowScatter,
}

/// The variant of `family` for `dtype`; `precise` picks the f64-computing variant of f32/f16 math.
/// None: no variant for this dtype (bf16, complex, sub-byte), so the op takes the host fallback.
pub fn numeric(family: Family, dtype: Dtype, precise: bool) -> Option<Kernel> {
    match (family, dtype) {
        (Family::Unary, Dtype::F32) => Some(if precise { unary_f32p } else { unary_f32 }),
        (Family::Unary, Dtype::F64) => Some(unary_f64),
        (Family::Unary, Dtype::F16) => Some(if precise { unary_f16p } else { unary_f16 }),
        (Family::Unary, Dtype::S8) => Some(unary_s8),
        (Family::Unary, Dtype::S16) => Some(unary_s16),
        (Family::Unary, Dtype::S32) => Some(unary_s32),
        (Family::Unary, Dtype::S64) => Some(unary_s64),
        (Family::Unary, Dtype::U8) => Some(unary_u8),
        (Family::Unary, Dtype::U16) => Some(unary_u16),
        (Family::Unary, Dtype::U32) => Some(unary_u32),
        (Family::Unary, Dtype::U64) => Some(unary_u64),
        (Family::Binary, Dtype::F32) => Some(if precise { binary_f32p } else { binary_f32 }),
        (Family::Binary, Dtype::F64) => Some(binary_f64),
        (Family::Binary, Dtype::F16) => Some(if precise { binary_f16p } else { binary_f16 }),
        (Family::Binary, Dtype::S8) => Some(binary_s8),
        (Family::Binary, Dtype::S16) => Some(binary_s16),
        (Family::Binary, Dtype::S32) => Some(binary_s32),
        (Family::Binary, Dtype::S64) => Some(binary_s64),
        (Family::Binary, Dtype::U8) => Some(binary_u8),
        (Family::Binary, Dtype::U16) => Some(binary_u16),
        (Family::Binary, Dtype::U32) => Some(binary_u32),
        (Family::Binary, Dtype::U64) => Some(binary_u64),
        (Family::Compare, Dtype::F32) => Some(compare_f32),
        (Family::Compare, Dtype::F64) => Some(compare_f64),
        (Family::Compare, Dtype::F16) => Some(compare_f16),
        (Family::Compare, Dtype::S8) => Some(compare_s8),
        (Family::Compare, Dtype::S16) => Some(compare_s16),
        (Family::Compare, Dtype::S32) => Some(compare_s32),
        (Family::Compare, Dtype::S64) => Some(compare_s64),
        (Family::Compare, Dtype::U8) => Some(compare_u8),
        (Family::Compare, Dtype::U16) => Some(compare_u16),
        (Family::Compare, Dtype::U32) => Some(compare_u32),
        (Family::Compare, Dtype::U64) => Some(compare_u64),
        (Family::Reduce, Dtype::F32) => Some(if precise { reduce_f32p } else { reduce_f32 }),
        (Family::Reduce, Dtype::F64) => Some(reduce_f64),
        (Family::Reduce, Dtype::F16) => Some(if precise { reduce_f16p } else { reduce_f16 }),
        (Family::Reduce, Dtype::S8) => Some(reduce_s8),
        (Family::Reduce, Dtype::S16) => Some(reduce_s16),
        (Family::Reduce, Dtype::S32) => Some(reduce_s32),
        (Family::Reduce, Dtype::S64) => Some(reduce_s64),
        (Family::Reduce, Dtype::U8) => Some(reduce_u8),
        (Family::Reduce, Dtype::U16) => Some(reduce_u16),
        (Family::Reduce, Dtype::U32) => Some(reduce_u32),
        (Family::Reduce, Dtype::U64) => Some(reduce_u64),
        (Family::ReduceColumns, Dtype::F32) => Some(if precise { reduce_columns_f32p } else { reduce_columns_f32 }),
        (Family::ReduceColumns, Dtype::F64) => Some(reduce_columns_f64),
        (Family::ReduceColumns, Dtype::F16) => Some(if precise { reduce_columns_f16p } else { reduce_columns_f16 }),
        (Family::ReduceColumns, Dtype::S8) => Some(reduce_columns_s8),
        (Family::ReduceColumns, Dtype::S16) => Some(reduce_columns_s16),
        (Family::ReduceColumns, Dtype::S32) => Some(reduce_columns_s32),
        (Family::ReduceColumns, Dtype::S64) => Some(reduce_columns_s64),
        (Family::ReduceColumns, Dtype::U8) => Some(reduce_columns_u8),
        (Family::ReduceColumns, Dtype::U16) => Some(reduce_columns_u16),
        (Family::ReduceColumns, Dtype::U32) => Some(reduce_columns_u32),
        (Family::ReduceColumns, Dtype::U64) => Some(reduce_columns_u64),
        (Family::Gemm, Dtype::F32) => Some(if precise { gemm_f32p } else { gemm_f32 }),
        (Family::Gemm, Dtype::F64) => Some(gemm_f64),
        (Family::Gemm, Dtype::F16) => Some(if precise { gemm_f16p } else { gemm_f16 }),
        (Family::Gemm, Dtype::S8) => Some(gemm_s8),
        (Family::Gemm, Dtype::S16) => Some(gemm_s16),
        (Family::Gemm, Dtype::S32) => Some(gemm_s32),
        (Family::Gemm, Dtype::S64) => Some(gemm_s64),
        (Family::Gemm, Dtype::U8) => Some(gemm_u8),
        (Family::Gemm, Dtype::U16) => Some(gemm_u16),
        (Family::Gemm, Dtype::U32) => Some(gemm_u32),
        (Family::Gemm, Dtype::U64) => Some(gemm_u64),
        (Family::GemmCoop, Dtype::F16) => (!precise).then_some(gemm_coop_f16),
        (Family::GemmTiled, Dtype::F32) => (!precise).then_some(gemm_tiled_f32),
        (Family::GemmTiled8, Dtype::F32) => (!precise).then_some(gemm_tiled8_f32),
        (Family::GemmTiled, Dtype::F16) => (!precise).then_some(gemm_tiled_f16),
        (Family::GemmTiled8, Dtype::F16) => (!precise).then_some(gemm_tiled8_f16),
        (Family::GemmTiled, Dtype::S8) => Some(gemm_tiled_s8),
        (Family::GemmTiled8, Dtype::S8) => Some(gemm_tiled8_s8),
        (Family::GemmTiled, Dtype::S16) => Some(gemm_tiled_s16),
        (Family::GemmTiled8, Dtype::S16) => Some(gemm_tiled8_s16),
        (Family::GemmTiled, Dtype::S32) => Some(gemm_tiled_s32),
        (Family::GemmTiled8, Dtype::S32) => Some(gemm_tiled8_s32),
        (Family::GemmTiled, Dtype::U8) => Some(gemm_tiled_u8),
        (Family::GemmTiled8, Dtype::U8) => Some(gemm_tiled8_u8),
        (Family::GemmTiled, Dtype::U16) => Some(gemm_tiled_u16),
        (Family::GemmTiled8, Dtype::U16) => Some(gemm_tiled8_u16),
        (Family::GemmTiled, Dtype::U32) => Some(gemm_tiled_u32),
        (Family::GemmTiled8, Dtype::U32) => Some(gemm_tiled8_u32),
        (Family::ReduceSerial, Dtype::F32) => Some(if precise { reduce_serial_f32p } else { reduce_serial_f32 }),
        (Family::ReduceSerial, Dtype::F64) => Some(reduce_serial_f64),
        (Family::ReduceSerial, Dtype::F16) => Some(if precise { reduce_serial_f16p } else { reduce_serial_f16 }),
        (Family::ReduceSerial, Dtype::S8) => Some(reduce_serial_s8),
        (Family::ReduceSerial, Dtype::S16) => Some(reduce_serial_s16),
        (Family::ReduceSerial, Dtype::S32) => Some(reduce_serial_s32),
        (Family::ReduceSerial, Dtype::S64) => Some(reduce_serial_s64),
        (Family::ReduceSerial, Dtype::U8) => Some(reduce_serial_u8),
        (Family::ReduceSerial, Dtype::U16) => Some(reduce_serial_u16),
        (Family::ReduceSerial, Dtype::U32) => Some(reduce_serial_u32),
        (Family::ReduceSerial, Dtype::U64) => Some(reduce_serial_u64),
        (Family::GemmRows, Dtype::F32) => Some(if precise { gemm_rows_f32p } else { gemm_rows_f32 }),
        (Family::GemmRows, Dtype::F64) => Some(gemm_rows_f64),
        (Family::GemmRows, Dtype::F16) => Some(if precise { gemm_rows_f16p } else { gemm_rows_f16 }),
        (Family::GemmRows, Dtype::S8) => Some(gemm_rows_s8),
        (Family::GemmRows, Dtype::S16) => Some(gemm_rows_s16),
        (Family::GemmRows, Dtype::S32) => Some(gemm_rows_s32),
        (Family::GemmRows, Dtype::S64) => Some(gemm_rows_s64),
        (Family::GemmRows, Dtype::U8) => Some(gemm_rows_u8),
        (Family::GemmRows, Dtype::U16) => Some(gemm_rows_u16),
        (Family::GemmRows, Dtype::U32) => Some(gemm_rows_u32),
        (Family::GemmRows, Dtype::U64) => Some(gemm_rows_u64),
        (Family::ArgReduce, Dtype::F32) => Some(arg_reduce_f32),
        (Family::ArgReduce, Dtype::F64) => Some(arg_reduce_f64),
        (Family::ArgReduce, Dtype::F16) => Some(arg_reduce_f16),
        (Family::ArgReduce, Dtype::S8) => Some(arg_reduce_s8),
        (Family::ArgReduce, Dtype::S16) => Some(arg_reduce_s16),
        (Family::ArgReduce, Dtype::S32) => Some(arg_reduce_s32),
        (Family::ArgReduce, Dtype::S64) => Some(arg_reduce_s64),
        (Family::ArgReduce, Dtype::U8) => Some(arg_reduce_u8),
        (Family::ArgReduce, Dtype::U16) => Some(arg_reduce_u16),
        (Family::ArgReduce, Dtype::U32) => Some(arg_reduce_u32),
        (Family::ArgReduce, Dtype::U64) => Some(arg_reduce_u64),
        (Family::Classify, Dtype::F32) => Some(classify_f32),
        (Family::Classify, Dtype::F64) => Some(classify_f64),
        (Family::Classify, Dtype::F16) => Some(classify_f16),
        (Family::Window, Dtype::F32) => Some(if precise { window_f32p } else { window_f32 }),
        (Family::Window, Dtype::F64) => Some(window_f64),
        (Family::Window, Dtype::F16) => Some(if precise { window_f16p } else { window_f16 }),
        (Family::Window, Dtype::S8) => Some(window_s8),
        (Family::Window, Dtype::S16) => Some(window_s16),
        (Family::Window, Dtype::S32) => Some(window_s32),
        (Family::Window, Dtype::S64) => Some(window_s64),
        (Family::Window, Dtype::U8) => Some(window_u8),
        (Family::Window, Dtype::U16) => Some(window_u16),
        (Family::Window, Dtype::U32) => Some(window_u32),
        (Family::Window, Dtype::U64) => Some(window_u64),
        (Family::Sort, Dtype::F32) => Some(sort_f32),
        (Family::Sort, Dtype::F64) => Some(sort_f64),
        (Family::Sort, Dtype::F16) => Some(sort_f16),
        (Family::Sort, Dtype::S8) => Some(sort_s8),
        (Family::Sort, Dtype::S16) => Some(sort_s16),
        (Family::Sort, Dtype::S32) => Some(sort_s32),
        (Family::Sort, Dtype::S64) => Some(sort_s64),
        (Family::Sort, Dtype::U8) => Some(sort_u8),
        (Family::Sort, Dtype::U16) => Some(sort_u16),
        (Family::Sort, Dtype::U32) => Some(sort_u32),
        (Family::Sort, Dtype::U64) => Some(sort_u64),
        (Family::SortBitonic, Dtype::F32) => Some(sort_bitonic_f32),
        (Family::SortBitonic, Dtype::F64) => Some(sort_bitonic_f64),
        (Family::SortBitonic, Dtype::F16) => Some(sort_bitonic_f16),
        (Family::SortBitonic, Dtype::S8) => Some(sort_bitonic_s8),
        (Family::SortBitonic, Dtype::S16) => Some(sort_bitonic_s16),
        (Family::SortBitonic, Dtype::S32) => Some(sort_bitonic_s32),
        (Family::SortBitonic, Dtype::S64) => Some(sort_bitonic_s64),
        (Family::SortBitonic, Dtype::U8) => Some(sort_bitonic_u8),
        (Family::SortBitonic, Dtype::U16) => Some(sort_bitonic_u16),
        (Family::SortBitonic, Dtype::U32) => Some(sort_bitonic_u32),
        (Family::SortBitonic, Dtype::U64) => Some(sort_bitonic_u64),
        (Family::Scatter, Dtype::F32) => Some(if precise { scatter_f32p } else { scatter_f32 }),
        (Family::Scatter, Dtype::F64) => Some(scatter_f64),
        (Family::Scatter, Dtype::F16) => Some(if precise { scatter_f16p } else { scatter_f16 }),
        (Family::Scatter, Dtype::S8) => Some(scatter_s8),
        (Family::Scatter, Dtype::S16) => Some(scatter_s16),
        (Family::Scatter, Dtype::S32) => Some(scatter_s32),
        (Family::Scatter, Dtype::S64) => Some(scatter_s64),
        (Family::Scatter, Dtype::U8) => Some(scatter_u8),
        (Family::Scatter, Dtype::U16) => Some(scatter_u16),
        (Family::Scatter, Dtype::U32) => Some(scatter_u32),
        (Family::Scatter, Dtype::U64) => Some(scatter_u64),
        (Family::TriSolve, Dtype::F32) => Some(if precise { trisolve_f32p } else { trisolve_f32 }),
        (Family::TriSolve, Dtype::F64) => Some(trisolve_f64),
        (Family::TriSolve, Dtype::F16) => Some(trisolve_f16),
        (Family::TriSolve, Dtype::C64) => Some(if precise { trisolve_c64p } else { trisolve_c64 }),
        (Family::TriSolve, Dtype::C128) => Some(trisolve_c128),
        (Family::WindowScatter, Dtype::F32) => Some(window_scatter_f32),
        (Family::WindowScatter, Dtype::F64) => Some(window_scatter_f64),
        (Family::WindowScatter, Dtype::F16) => Some(window_scatter_f16),
        (Family::WindowScatter, Dtype::S8) => Some(window_scatter_s8),
        (Family::WindowScatter, Dtype::S16) => Some(window_scatter_s16),
        (Family::WindowScatter, Dtype::S32) => Some(window_scatter_s32),
        (Family::WindowScatter, Dtype::S64) => Some(window_scatter_s64),
        (Family::WindowScatter, Dtype::U8) => Some(window_scatter_u8),
        (Family::WindowScatter, Dtype::U16) => Some(window_scatter_u16),
        (Family::WindowScatter, Dtype::U32) => Some(window_scatter_u32),
        (Family::WindowScatter, Dtype::U64) => Some(window_scatter_u64),
        _ => None,
    }
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
    match (dtype, precise) {
        (Dtype::F32, true) => Some((reduce_out_acc_f32p, reduce_in_acc_f32p)),
        (Dtype::F16, true) => Some((reduce_out_acc_f16p, reduce_in_acc_f16p)),
        (Dtype::F16, false) => Some((reduce_out_acc_f16, reduce_in_acc_f16)),
        _ => None,
    }
}
