//! Data movement: strided copies (transpose, broadcast, slice, reverse, concatenate, pad,
//! put_slice are all one kernel with different offsets and strides), fills, iota and eye.
use super::*;
use crate::dtype::Dtype;
use super::precise_f32;
use crate::shaders;
use crate::tensor::{alloc, BufferArg};

fn copy_kernel(elem_bytes: u64) -> Result<Kernel> {
    by_width(elem_bytes, shaders::copy_b1, shaders::copy_b2, shaders::copy_b4, shaders::copy_b8)
}

/// Queues `dst[dst_offset + i . dst_strides] = src[src_offset + i . src_strides]` over `dims`.
#[allow(clippy::too_many_arguments)]
pub fn strided_copy(
    elem_bytes: u64,
    src: &BufferRef,
    src_offset: i64,
    src_strides: &[i64],
    dst: &BufferRef,
    dst_offset: i64,
    dst_strides: &[i64],
    dims: &[u64],
) -> Result<()> {
    copy_with_offset(elem_bytes, src, src_offset, src_strides, dst, dst_offset, dst_strides, dims, None)
}

/// On CPU devices, the grid of copy.comp's by-rows path (its specialization constant 0) for a
/// copy of collapsed `dims`: invocations along the innermost dim, a workgroup row per row of the
/// outer ones, so the innermost index needs no division (lavapipe runs a vector's divisions a lane
/// at a time). This machine, one run each, alternated: a 128 x 784 f32 transpose 0.88-0.99 ms by
/// rows against 1.20-1.30 by element (a negate of the same size 0.29-0.50); the MNIST step under
/// the Evaluator 2.86 / 2.91 ms against 3.77 / 3.18. Only rows of at least half a workgroup
/// (shorter ones would leave most of it idle); GPUs keep the tuned element path.
fn rows_grid(dims: &[u64]) -> Option<[u32; 3]> {
    if !cpu_device() {
        return None;
    }
    let wg = crate::policy::workgroup();
    let (&inner, outer) = dims.split_last()?;
    let rows: u64 = outer.iter().product();
    let fits = !outer.is_empty() && inner >= wg / 2 && inner.div_ceil(wg) <= 65535 && rows.div_ceil(65535) <= 65535;
    fits.then(|| [inner.div_ceil(wg) as u32, rows.min(65535) as u32, rows.div_ceil(65535) as u32])
}

/// Start indices that are tensors (Nx's dynamic slicing), checked: scalars of any integer type,
/// each with the most it may be (dim - length: Nx clamps such starts so the slice fits) and the
/// stride, in elements of the width the copy moves, it moves one side of the copy by. The
/// device clamps them, so the host never reads them.
#[derive(Clone)]
struct DynamicStarts {
    starts: Vec<BufferRef>,
    /// 4 bits a start (dynamic_start.glsl): log2 of its bytes, bit 2 signed.
    types: u64,
    max_starts: Vec<u64>,
    strides: Vec<i64>,
    /// Whether they move the output (put_slice) rather than the input (slice).
    on_dst: bool,
    /// The largest offset they make (every start at its bound), for the extent check.
    max: i64,
}

/// Starts one copy.comp STARTS dispatch clamps itself (more take dynamic_offset.comp first).
const FUSED_STARTS: usize = 4;
/// The collapsed rank that variant has room for in its push constants.
const FUSED_STARTS_RANK: usize = 4;

impl DynamicStarts {
    fn new(starts: &[(BufferRef, Dtype)], max_starts: &[u64], strides: &[i64], on_dst: bool) -> Result<Self> {
        if starts.is_empty() || starts.len() != max_starts.len() || starts.len() != strides.len() {
            return Err(arg_error!("dynamic starts: one max start and one stride per start tensor"));
        }
        if starts.len() > MAX_DYNAMIC_STARTS {
            return Err(unsupported!("more than {MAX_DYNAMIC_STARTS} tensor start indices"));
        }
        let mut types = 0u64;
        for (i, (start, dtype)) in starts.iter().enumerate() {
            let (log2_bytes, signed) = match dtype {
                Dtype::S8 => (0, true),
                Dtype::S16 => (1, true),
                Dtype::S32 => (2, true),
                Dtype::S64 => (3, true),
                Dtype::U8 => (0, false),
                Dtype::U16 => (1, false),
                Dtype::U32 => (2, false),
                Dtype::U64 => (3, false),
                other => return Err(arg_error!("a start index must be an integer tensor, got {}", other.name())),
            };
            if start.bytes < dtype.bytes() {
                return Err(arg_error!("a start index must be a scalar tensor"));
            }
            types |= (log2_bytes | (signed as u64) << 2) << (4 * i);
        }
        let max = max_starts.iter().zip(strides).map(|(&m, &s)| m as i64 * s).sum();
        Ok(DynamicStarts {
            starts: starts.iter().map(|(b, _)| b.clone()).collect(),
            types,
            max_starts: max_starts.to_vec(),
            strides: strides.to_vec(),
            on_dst,
            max,
        })
    }

    /// The same starts moving a copy of 8-byte halves (c128).
    fn in_halves(&self) -> Self {
        DynamicStarts { strides: self.strides.iter().map(|s| s * 2).collect(), max: self.max * 2, ..self.clone() }
    }

    /// Queues dynamic_offset.comp over the starts; returns the one-int buffer that will hold their
    /// clamped offset.
    fn offset_on_device(&self) -> Result<BufferRef> {
        let mut push = Push::new();
        push.set(0, self.starts.len() as u64)?;
        push.set(1, self.types)?;
        push.set_dims(2, &self.max_starts)?;
        push.set_strides(10, &self.strides)?;
        let offset = alloc(4)?;
        let bindings: Vec<&BufferRef> =
            (0..MAX_DYNAMIC_STARTS).map(|i| self.starts.get(i).unwrap_or(&self.starts[0])).chain([&offset]).collect();
        dispatch(shaders::dynamic_offset, 0, &bindings, push, [1, 1, 1])?;
        Ok(offset)
    }
}

#[allow(clippy::too_many_arguments)]
fn copy_with_offset(
    elem_bytes: u64,
    src: &BufferRef,
    src_offset: i64,
    src_strides: &[i64],
    dst: &BufferRef,
    dst_offset: i64,
    dst_strides: &[i64],
    dims: &[u64],
    starts: Option<&DynamicStarts>,
) -> Result<()> {
    if src_strides.len() != dims.len() || dst_strides.len() != dims.len() {
        return Err(arg_error!("strides and dims must have the same length"));
    }
    if elem_bytes == 16 {
        // c128: pairs of 8-byte halves, with the pair as an innermost axis.
        let pairs = |strides: &[i64]| strides.iter().map(|s| s * 2).chain([1]).collect::<Vec<_>>();
        let dims: Vec<u64> = dims.iter().copied().chain([2]).collect();
        let halves = starts.map(DynamicStarts::in_halves);
        return copy_with_offset(
            8,
            src,
            src_offset * 2,
            &pairs(src_strides),
            dst,
            dst_offset * 2,
            &pairs(dst_strides),
            &dims,
            halves.as_ref(),
        );
    }
    check_extent(src, elem_bytes, src_offset, dims, src_strides)?;
    check_extent(dst, elem_bytes, dst_offset, dims, dst_strides)?;
    if let Some(d) = starts {
        // The offset is clamped on the device to [0, max]: both ends must fit.
        let (buffer, offset, strides) =
            if d.on_dst { (dst, dst_offset, dst_strides) } else { (src, src_offset, src_strides) };
        check_extent(buffer, elem_bytes, offset + d.max, dims, strides)?;
    }
    let n = element_count(dims);
    if n == 0 {
        return Ok(());
    }
    let (cdims, strides) = collapse_to(dims, &[src_strides.to_vec(), dst_strides.to_vec()], MAX_COPY_RANK)?;
    // A whole-buffer prefix copied as it lies (put_slice's copy of its target, a reshape's copy)
    // is a transfer command on CPU devices: lavapipe runs it as a memcpy, where the strided
    // kernel took ~15 ns an element (a 40x40 f32 copy 26.7 us against 3-4 us for any dispatch).
    // Only from and to offset 0: a compiled program swaps whole buffers for its arguments.
    let flat = cdims.len() == 1 && strides.iter().all(|s| s[0] == 1);
    if cpu_device() && starts.is_none() && flat && src_offset == 0 && dst_offset == 0 {
        let copy = Command::Copy { src: src.get()?, dst: dst.get()?, bytes: n * elem_bytes };
        return record_command(copy, &[src, dst]);
    }
    let mut push = Push::new();
    push.set(0, n)?;
    push.set(1, cdims.len() as u64)?;
    push.set(2, src_offset as u64)?;
    push.set(3, dst_offset as u64)?;
    push.set_dims(4, &cdims)?;
    let Some(d) = starts else {
        push.set_strides(12, &strides[0])?;
        push.set_strides(20, &strides[1])?;
        if let Some(groups) = rows_grid(&cdims) {
            return dispatch(copy_kernel(elem_bytes)?, 1, &[src, dst], push, groups);
        }
        return dispatch(copy_kernel(elem_bytes)?, 0, &[src, dst], push, elementwise_groups(n));
    };
    // Few starts and a low rank: one dispatch that clamps the starts in every invocation (on
    // lavapipe the separate offset dispatch cost 5-11 us an op); else the offset first.
    if d.starts.len() <= FUSED_STARTS && cdims.len() <= FUSED_STARTS_RANK {
        push.set_strides(8, &strides[0])?;
        push.set_strides(12, &strides[1])?;
        push.set(16, d.starts.len() as u64 | d.types << 8)?;
        push.set_dims(17, &d.max_starts)?;
        push.set_strides(21, &d.strides)?;
        let kernel = by_width(
            elem_bytes,
            shaders::copy_starts_b1,
            shaders::copy_starts_b2,
            shaders::copy_starts_b4,
            shaders::copy_starts_b8,
        )?;
        let start = |i: usize| d.starts.get(i).unwrap_or(&d.starts[0]);
        return dispatch(kernel, d.on_dst as u32, &[src, start(0), start(1), start(2), start(3), dst], push, elementwise_groups(n));
    }
    push.set_strides(12, &strides[0])?;
    push.set_strides(20, &strides[1])?;
    let offset = d.offset_on_device()?;
    let kernel = by_width(
        elem_bytes,
        shaders::copy_dynamic_b1,
        shaders::copy_dynamic_b2,
        shaders::copy_dynamic_b4,
        shaders::copy_dynamic_b8,
    )?;
    dispatch(kernel, d.on_dst as u32, &[src, &offset, dst], push, elementwise_groups(n))
}

/// The most tensor start indices one slice takes (dynamic_offset.comp's bindings).
const MAX_DYNAMIC_STARTS: usize = 8;

/// slice with tensor starts: a new contiguous tensor of shape `dims` read from `src` at `offset`
/// (the integer starts' part) plus the clamped tensor starts' part, through `strides`.
#[rustler::nif]
#[allow(clippy::too_many_arguments)]
fn dynamic_slice(
    env: rustler::Env,
    elem_bytes: u64,
    src: BufferRef,
    offset: i64,
    dims: Vec<u64>,
    strides: Vec<i64>,
    starts: Vec<(BufferRef, Dtype)>,
    max_starts: Vec<u64>,
    start_strides: Vec<i64>,
) -> Result<BufferRef> {
    let on: Vec<&BufferRef> = std::iter::once(&src).chain(starts.iter().map(|(b, _)| b)).collect();
    let _device = crate::context::use_device_of(&on)?;
    let _capture = crate::capture::scope(env);
    let starts = DynamicStarts::new(&starts, &max_starts, &start_strides, false)?;
    let out = alloc(element_count(&dims) * elem_bytes)?;
    let out_strides = contiguous_strides(&dims);
    copy_with_offset(elem_bytes, &src, offset, &strides, &out, 0, &out_strides, &dims, Some(&starts))?;
    Ok(out)
}

/// put_slice with tensor starts, into `dst` (a copy of the target the caller has just made):
/// `src` (contiguous, shape `dims`) written at `offset` plus the clamped tensor starts' part,
/// through `dst_strides`.
#[rustler::nif]
#[allow(clippy::too_many_arguments)]
fn dynamic_put_slice(
    env: rustler::Env,
    elem_bytes: u64,
    dst: BufferRef,
    offset: i64,
    dst_strides: Vec<i64>,
    src: BufferRef,
    dims: Vec<u64>,
    starts: Vec<(BufferRef, Dtype)>,
    max_starts: Vec<u64>,
    start_strides: Vec<i64>,
) -> Result<BufferRef> {
    let on: Vec<&BufferRef> = [&dst, &src].into_iter().chain(starts.iter().map(|(b, _)| b)).collect();
    let _device = crate::context::use_device_of(&on)?;
    let _capture = crate::capture::scope(env);
    let starts = DynamicStarts::new(&starts, &max_starts, &start_strides, true)?;
    let src_strides = contiguous_strides(&dims);
    copy_with_offset(elem_bytes, &src, 0, &src_strides, &dst, offset, &dst_strides, &dims, Some(&starts))?;
    Ok(dst)
}

/// A new contiguous tensor of shape `dims` read from `src` through `offset` and `strides`.
pub fn contiguous_copy(elem_bytes: u64, src: &BufferRef, offset: i64, strides: &[i64], dims: &[u64]) -> Result<BufferRef> {
    let out = alloc(element_count(dims) * elem_bytes)?;
    strided_copy(elem_bytes, src, offset, strides, &out, 0, &contiguous_strides(dims), dims)?;
    Ok(out)
}

/// `contiguous_copy` as a NIF (static slices, reverse, the Elixir side's copies).
#[rustler::nif]
fn view_copy(env: rustler::Env, elem_bytes: u64, src: BufferArg, offset: i64, dims: Vec<u64>, strides: Vec<i64>) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&src])?;
    let _capture = crate::capture::scope(env);
    contiguous_copy(elem_bytes, &src, offset, &strides, &dims)
}

/// NXV_LAZY_VIEWS=0 (read once) makes every transpose and broadcast a copy at once, as before
/// views (to measure what they save).
static LAZY_VIEWS: once_cell::sync::Lazy<bool> =
    once_cell::sync::Lazy::new(|| crate::policy::env_switch("NXV_LAZY_VIEWS") != Some(false));

/// A transpose or broadcast of `src` (`strides` in elements of `src`, none negative, offset 0)
/// as a lazy view (tensor.rs `View`): no command until an op needs its own buffer, and binary
/// ops, select and dot read `src` through the strides directly. A view of a lazy view reads the
/// first one's base where the strides compose. While capturing (a program's intermediates are
/// its own) or with NXV_LAZY_VIEWS=0, the copy is made now, as `view_copy` does.
#[rustler::nif]
fn lazy_view(env: rustler::Env, elem_bytes: u64, src: BufferRef, dims: Vec<u64>, strides: Vec<i64>) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&src])?;
    let _capture = crate::capture::scope(env);
    if dims.len() != strides.len() || strides.iter().any(|&s| s < 0) {
        return Err(arg_error!("lazy_view: dims {dims:?} and strides {strides:?} do not match, or a stride is negative"));
    }
    if !*LAZY_VIEWS || crate::capture::capturing() || element_count(&dims) == 0 {
        return contiguous_copy(elem_bytes, &src, 0, &strides, &dims);
    }
    check_extent(&src, elem_bytes, 0, &dims, &strides)?;
    let (base, strides) = match src.lazy_parts() {
        Some((base, src_dims, src_strides)) => match compose(&src_dims, &src_strides, &dims, &strides) {
            Some(composed) => (base, composed),
            None => (src, strides),
        },
        None => (src, strides),
    };
    crate::tensor::lazy_view(&base, elem_bytes, dims, strides, copy_view)
}

/// A lazy view's contiguous copy, queued on the device queue even while capturing.
fn copy_view(base: &BufferRef, view: &crate::tensor::View) -> Result<BufferRef> {
    crate::capture::outside(|| {
        let _device = crate::context::use_device_of(&[base])?;
        contiguous_copy(view.elem_bytes, base, 0, &view.strides, &view.dims)
    })
}

/// Strides into a view's base for a view of that view: `strides` step through the first view's
/// elements in its contiguous order, so each non-zero one is the contiguous stride of exactly one
/// of its dims longer than 1 (transposes and broadcasts only move and repeat dims), whose base
/// stride it takes. None where one is not.
fn compose(view_dims: &[u64], view_strides: &[i64], dims: &[u64], strides: &[i64]) -> Option<Vec<i64>> {
    let own = contiguous_strides(view_dims);
    dims.iter()
        .zip(strides)
        .map(|(&d, &s)| {
            if d == 1 || s == 0 {
                return Some(0);
            }
            let j = (0..view_dims.len()).find(|&j| view_dims[j] > 1 && own[j] == s)?;
            Some(view_strides[j])
        })
        .collect()
}

/// Writes `src` (read through its offset and strides) into `dst` at `dst_offset` with
/// `dst_strides`. Only used on a buffer the caller has just allocated, before it is visible as a
/// tensor, so tensors stay immutable.
#[rustler::nif]
#[allow(clippy::too_many_arguments)]
fn copy_into(
    env: rustler::Env,
    elem_bytes: u64,
    dst: BufferRef,
    dst_offset: i64,
    dst_strides: Vec<i64>,
    src: BufferRef,
    src_offset: i64,
    src_strides: Vec<i64>,
    dims: Vec<u64>,
) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&dst, &src])?;
    let _capture = crate::capture::scope(env);
    strided_copy(elem_bytes, &src, src_offset, &src_strides, &dst, dst_offset, &dst_strides, &dims)?;
    Ok(dst)
}

/// A new tensor of `n` elements of `elem_bytes` bytes, all set to the bit pattern `bits`, on
/// `device`.
#[rustler::nif]
fn fill(env: rustler::Env, elem_bytes: u64, n: u64, bits: u64, device: usize) -> Result<BufferRef> {
    let _device = crate::context::use_device(device)?;
    let _capture = crate::capture::scope(env);
    fill_on_current(elem_bytes, n, bits)
}

/// The same fill as `tensor`'s (a tensor `fill` made: a constant) on `device`: how a constant
/// made on one device follows the other operands of an op to theirs (Nx.Vulkan.Native), with no
/// host sync.
#[rustler::nif]
fn refill(env: rustler::Env, tensor: BufferRef, device: usize) -> Result<BufferRef> {
    let &(elem_bytes, n, bits) = tensor.filled.get().ok_or_else(|| arg_error!("refill takes a tensor made by fill"))?;
    let _device = crate::context::use_device(device)?;
    let _capture = crate::capture::scope(env);
    fill_on_current(elem_bytes, n, bits)
}

pub(crate) fn fill_on_current(elem_bytes: u64, n: u64, bits: u64) -> Result<BufferRef> {
    let kernel = by_width(elem_bytes, shaders::fill_b1, shaders::fill_b2, shaders::fill_b4, shaders::fill_b8)?;
    let out = alloc(n * elem_bytes)?;
    let mut push = Push::new();
    push.set(0, n)?;
    push.words[1] = bits as u32;
    push.words[2] = (bits >> 32) as u32;
    dispatch(kernel, 0, &[&out], push, elementwise_groups(n))?;
    let _ = out.filled.set((elem_bytes, n, bits));
    Ok(out)
}

/// iota (`eye` false): element i holds (i / inner) % dim, or i when dim is 0.
/// eye (`eye` true): 1 where the row (of `dim` rows) equals the column (of `inner` columns).
#[rustler::nif]
fn iota(env: rustler::Env, dtype: Dtype, n: u64, inner: u64, dim: u64, eye: bool, device: usize) -> Result<BufferRef> {
    let _device = crate::context::use_device(device)?;
    let _capture = crate::capture::scope(env);
    let kernel = shaders::iota(dtype)
        .ok_or_else(|| unsupported!("iota/eye on {} has no device kernel yet", dtype.name()))?;
    let out = alloc(n * dtype.bytes())?;
    let mut push = Push::new();
    push.set(0, n)?;
    push.set(1, inner.max(1))?;
    push.set(2, dim)?;
    dispatch(kernel, eye as u32, &[&out], push, elementwise_groups(n))?;
    Ok(out)
}

#[rustler::nif]
fn alloc_buffer(env: rustler::Env, bytes: u64, device: usize) -> Result<BufferRef> {
    let _device = crate::context::use_device(device)?;
    let _capture = crate::capture::scope(env);
    alloc(bytes)
}

/// gather: `indices` (s32 or s64 as `index_bytes` says, shape [..., k]) index `axes` of `x`
/// (shape `shape`); the output is the index tuples' shape followed by the dims not indexed, in
/// order.
#[rustler::nif]
#[allow(clippy::too_many_arguments)]
fn gather(
    env: rustler::Env,
    elem_bytes: u64,
    x: BufferRef,
    shape: Vec<u64>,
    indices: BufferRef,
    index_bytes: u64,
    indices_shape: Vec<u64>,
    axes: Vec<usize>,
) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&x, &indices])?;
    let _capture = crate::capture::scope(env);
    if index_bytes != 4 && index_bytes != 8 {
        return Err(arg_error!("gather: indices of {index_bytes} bytes (s32 or s64 expected)"));
    }
    gather_elements(elem_bytes, x, shape, indices, index_bytes, indices_shape, axes)
}

fn gather_elements(
    elem_bytes: u64,
    x: BufferRef,
    mut shape: Vec<u64>,
    indices: BufferRef,
    index_bytes: u64,
    indices_shape: Vec<u64>,
    axes: Vec<usize>,
) -> Result<BufferRef> {
    if elem_bytes == 16 {
        // c128: pairs of 8-byte halves, the pair an axis that is not indexed.
        shape.push(2);
        return gather_elements(8, x, shape, indices, index_bytes, indices_shape, axes);
    }
    let kernel = by_width(elem_bytes, shaders::gather_b1, shaders::gather_b2, shaders::gather_b4, shaders::gather_b8)?;
    let k = *indices_shape.last().ok_or_else(|| arg_error!("gather indices need a last axis"))? as usize;
    if k != axes.len() || axes.iter().any(|&a| a >= shape.len()) {
        return Err(arg_error!("gather: {k} indices per tuple for axes {axes:?} of shape {shape:?}"));
    }
    if k > MAX_RANK {
        return Err(unsupported!("gather over more than {MAX_RANK} axes"));
    }
    let strides = contiguous_strides(&shape);
    check_extent(&x, elem_bytes, 0, &shape, &strides)?;
    check_extent(&indices, index_bytes, 0, &indices_shape, &contiguous_strides(&indices_shape))?;
    let rest_axes: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
    let rest_dims: Vec<u64> = rest_axes.iter().map(|&d| shape[d]).collect();
    let rest_strides: Vec<i64> = rest_axes.iter().map(|&d| strides[d]).collect();
    let rest = element_count(&rest_dims);
    let tuples = element_count(&indices_shape) / (k.max(1) as u64);
    let n = tuples * rest;
    let (rest_dims, rest_strides) = collapse(&rest_dims, &[rest_strides])?;
    let out = alloc(n * elem_bytes)?;
    if n == 0 {
        return Ok(out);
    }
    let mut push = Push::new();
    push.set(0, n)?;
    push.set(1, k as u64)?;
    push.set(2, rest)?;
    push.set(3, rest_dims.len() as u64)?;
    push.set_dims(4, &axes.iter().map(|&a| shape[a]).collect::<Vec<_>>())?;
    push.set_strides(10, &axes.iter().map(|&a| strides[a]).collect::<Vec<_>>())?;
    push.set_dims(16, &rest_dims)?;
    push.set_strides(22, &rest_strides[0])?;
    dispatch(kernel, index_bytes as u32, &[&x, &indices, &out], push, elementwise_groups(n))?;
    Ok(out)
}

/// indexed_put / indexed_add: `updates` ([B, rest]) put into or added to `target` at the index
/// tuples `indices` (s64, [B, k]) over `axes`; a new tensor.
#[rustler::nif]
#[allow(clippy::too_many_arguments)]
fn scatter(
    env: rustler::Env,
    add: bool,
    dtype: Dtype,
    target: BufferRef,
    shape: Vec<u64>,
    indices: BufferRef,
    indices_shape: Vec<u64>,
    updates: BufferRef,
    axes: Vec<usize>,
) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&target, &indices, &updates])?;
    let _capture = crate::capture::scope(env);
    let what = if add { "indexed_add" } else { "indexed_put" };
    let kernel = crate::shaders::numeric(crate::shaders::Family::Scatter, dtype, precise_f32())
        .ok_or_else(|| unsupported!("{what} on {} has no device kernel yet", dtype.name()))?;
    let k = *indices_shape.last().ok_or_else(|| arg_error!("{what}: indices need a last axis"))? as usize;
    if k != axes.len() || axes.iter().any(|&a| a >= shape.len()) {
        return Err(arg_error!("{what}: {k} indices per tuple for axes {axes:?} of shape {shape:?}"));
    }
    if shape.len() > MAX_RANK || k > MAX_RANK {
        return Err(unsupported!("{what} beyond rank {MAX_RANK}"));
    }
    let tuples = element_count(&indices_shape) / (k.max(1) as u64);
    let rest: u64 = (0..shape.len()).filter(|d| !axes.contains(d)).map(|d| shape[d]).product();
    check_extent(&target, dtype.bytes(), 0, &shape, &contiguous_strides(&shape))?;
    check_extent(&indices, 8, 0, &[tuples * k as u64], &[1])?;
    check_extent(&updates, dtype.bytes(), 0, &[tuples * rest], &[1])?;
    if cpu_device() && tuples * (k as u64 + 3) > LAVAPIPE_LOOP_BUDGET {
        return Err(unsupported!("{what} of {tuples} updates exceeds what one pass can loop over on a CPU device"));
    }
    let n = element_count(&shape);
    let out = alloc(n * dtype.bytes())?;
    let mut push = Push::new();
    push.set(0, n)?;
    push.set(1, tuples)?;
    push.set(2, k as u64)?;
    push.set(3, rest)?;
    push.set(4, shape.len() as u64)?;
    push.set_dims(5, &shape)?;
    push.set_dims(11, &axes.iter().map(|&a| a as u64).collect::<Vec<_>>())?;
    push.set(17, axes.iter().map(|&a| 1u64 << a).sum())?;
    dispatch(kernel, add as u32, &[&target, &indices, &updates, &out], push, elementwise_groups(n))?;
    Ok(out)
}
