//! as_type between every pair of real dtypes, with Nx's rules (see shaders/convert.comp).
use super::*;
use crate::dtype::Dtype;
use crate::shaders;
use crate::tensor::{alloc, BufferArg};

/// Type codes of shaders/convert.comp.
fn type_code(dtype: Dtype) -> Option<u32> {
    use Dtype::*;
    Some(match dtype {
        F32 => 0,
        F64 => 1,
        F16 => 2,
        BF16 => 3,
        S8 => 4,
        S16 => 5,
        S32 => 6,
        S64 => 7,
        U8 => 8,
        U16 => 9,
        U32 => 10,
        U64 => 11,
        C64 => 12,
        C128 => 13,
        _ => return None,
    })
}

#[rustler::nif]
fn as_type(env: rustler::Env, from: Dtype, to: Dtype, x: BufferArg, n: u64) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&x])?;
    let _capture = crate::capture::scope(env);
    convert(from, to, &x, n)
}

/// as_type's kernel on the current device: the first `n` elements of `x` as `to`, in a new buffer.
pub fn convert(from: Dtype, to: Dtype, x: &BufferRef, n: u64) -> Result<BufferRef> {
    let (Some(i), Some(o)) = (type_code(from), type_code(to)) else {
        return Err(unsupported!("as_type from {} to {} has no device kernel", from.name(), to.name()));
    };
    check_extent(x, from.bytes(), 0, &[n], &[1])?;
    let out = alloc(n * to.bytes())?;
    let mut push = Push::new();
    push.set(0, n)?;
    // convert.comp's vector paths: for real types of at most 4 bytes four elements a step, and
    // eight from 4 to 2 bytes.
    let narrow = |d: Dtype| d.bytes() <= 4 && !matches!(d, Dtype::C64 | Dtype::C128);
    let units = match (narrow(from) && narrow(to), from.bytes(), to.bytes()) {
        (true, 4, 2) => n.div_ceil(8),
        (true, _, _) => n.div_ceil(4),
        _ => n,
    };
    dispatch_units(shaders::convert, i * 16 + o, &[x, &out], push, units)?;
    Ok(out)
}
