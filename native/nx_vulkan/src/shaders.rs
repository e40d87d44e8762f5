//! Every shader variant, compiled from GLSL at build time by vulkano-shaders: one source per op
//! family, dtype variants by defines. Each line makes a module (the compiled SPIR-V) and a
//! `Kernel` constant of the same name that the pipeline cache loads on first use.
#![allow(non_upper_case_globals)]
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
            pub const $variant: Kernel = Kernel { name: stringify!($variant), load: $variant::load };
        )*
    };
}

kernels! {
    unary_f32 => "shaders/unary.comp", "T" = "float";
    unary_f32p => "shaders/unary.comp", "T" = "float", "PRECISE" = "1";
    unary_f64 => "shaders/unary.comp", "T" = "double", "IS_F64" = "1";

    binary_f32 => "shaders/binary.comp", "T" = "float";
    binary_f32p => "shaders/binary.comp", "T" = "float", "PRECISE" = "1";
    binary_f64 => "shaders/binary.comp", "T" = "double", "IS_F64" = "1";
    compare_f32 => "shaders/binary.comp", "T" = "float", "OUT_U8" = "1";
    compare_f64 => "shaders/binary.comp", "T" = "double", "IS_F64" = "1", "OUT_U8" = "1";

    reduce_f32 => "shaders/reduce.comp", "T" = "float", "ACC" = "float";
    reduce_f32p => "shaders/reduce.comp", "T" = "float", "ACC" = "double";
    reduce_f64 => "shaders/reduce.comp", "T" = "double", "ACC" = "double";

    gemm_f32 => "shaders/gemm.comp", "T" = "float";
    gemm_f64 => "shaders/gemm.comp", "T" = "double";

    select_b1 => "shaders/select.comp", "T" = "uint8_t";
    select_b2 => "shaders/select.comp", "T" = "uint16_t";
    select_b4 => "shaders/select.comp", "T" = "uint";
    select_b8 => "shaders/select.comp", "T" = "uint64_t";

    copy_b1 => "shaders/copy.comp", "T" = "uint8_t";
    copy_b2 => "shaders/copy.comp", "T" = "uint16_t";
    copy_b4 => "shaders/copy.comp", "T" = "uint";
    copy_b8 => "shaders/copy.comp", "T" = "uint64_t";

    fill_b1 => "shaders/fill.comp", "T" = "uint8_t", "ELEM_BYTES" = "1";
    fill_b2 => "shaders/fill.comp", "T" = "uint16_t", "ELEM_BYTES" = "2";
    fill_b4 => "shaders/fill.comp", "T" = "uint", "ELEM_BYTES" = "4";
    fill_b8 => "shaders/fill.comp", "T" = "uint64_t", "ELEM_BYTES" = "8";

    iota_f32 => "shaders/iota.comp", "T" = "float";
    iota_f64 => "shaders/iota.comp", "T" = "double";
    iota_f16 => "shaders/iota.comp", "T" = "float16_t";
    iota_s8 => "shaders/iota.comp", "T" = "int8_t";
    iota_s16 => "shaders/iota.comp", "T" = "int16_t";
    iota_s32 => "shaders/iota.comp", "T" = "int";
    iota_s64 => "shaders/iota.comp", "T" = "int64_t";
    iota_u8 => "shaders/iota.comp", "T" = "uint8_t";
    iota_u16 => "shaders/iota.comp", "T" = "uint16_t";
    iota_u32 => "shaders/iota.comp", "T" = "uint";
    iota_u64 => "shaders/iota.comp", "T" = "uint64_t";

    convert_f32_f64 => "shaders/convert.comp", "TI" = "float", "TO" = "double";
    convert_f64_f32 => "shaders/convert.comp", "TI" = "double", "TO" = "float";
    convert_s32_f32 => "shaders/convert.comp", "TI" = "int", "TO" = "float";
    convert_s32_f64 => "shaders/convert.comp", "TI" = "int", "TO" = "double";
    convert_s64_f32 => "shaders/convert.comp", "TI" = "int64_t", "TO" = "float";
    convert_s64_f64 => "shaders/convert.comp", "TI" = "int64_t", "TO" = "double";
    convert_u8_f32 => "shaders/convert.comp", "TI" = "uint8_t", "TO" = "float";
    convert_u8_f64 => "shaders/convert.comp", "TI" = "uint8_t", "TO" = "double";
    convert_s32_s64 => "shaders/convert.comp", "TI" = "int", "TO" = "int64_t";
    convert_s64_s32 => "shaders/convert.comp", "TI" = "int64_t", "TO" = "int";
    convert_u8_s32 => "shaders/convert.comp", "TI" = "uint8_t", "TO" = "int";
    convert_u8_s64 => "shaders/convert.comp", "TI" = "uint8_t", "TO" = "int64_t";
    convert_s32_u8 => "shaders/convert.comp", "TI" = "int", "TO" = "uint8_t";
    convert_s64_u8 => "shaders/convert.comp", "TI" = "int64_t", "TO" = "uint8_t";
}
