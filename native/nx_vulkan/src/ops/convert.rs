//! as_type on the device for the conversions whose GLSL semantics equal Nx's: float->float,
//! int->float, int->int (wrapping). Others report `unsupported` and take the host fallback.
use super::*;
use crate::dtype::Dtype;
use crate::shaders;
use crate::tensor::alloc;

fn convert_kernel(from: Dtype, to: Dtype) -> Result<Kernel> {
    use Dtype::*;
    Ok(match (from, to) {
        (F32, F64) => shaders::convert_f32_f64,
        (F64, F32) => shaders::convert_f64_f32,
        (S32, F32) => shaders::convert_s32_f32,
        (S32, F64) => shaders::convert_s32_f64,
        (S64, F32) => shaders::convert_s64_f32,
        (S64, F64) => shaders::convert_s64_f64,
        (U8, F32) => shaders::convert_u8_f32,
        (U8, F64) => shaders::convert_u8_f64,
        (S32, S64) => shaders::convert_s32_s64,
        (S64, S32) => shaders::convert_s64_s32,
        (U8, S32) => shaders::convert_u8_s32,
        (U8, S64) => shaders::convert_u8_s64,
        (S32, U8) => shaders::convert_s32_u8,
        (S64, U8) => shaders::convert_s64_u8,
        _ => {
            return Err(unsupported!(
                "as_type from {} to {} has no device kernel yet",
                from.name(),
                to.name()
            ))
        }
    })
}

#[rustler::nif]
fn as_type(from: Dtype, to: Dtype, x: BufferRef, n: u64) -> Result<BufferRef> {
    let kernel = convert_kernel(from, to)?;
    check_extent(&x, from.bytes(), 0, &[n], &[1])?;
    let out = alloc(n * to.bytes())?;
    let mut push = Push::new();
    push.set(0, n)?;
    dispatch(kernel, 0, &[&x, &out], push, elementwise_groups(n))?;
    Ok(out)
}
