//! Reductions (sum, product, reduce_max, reduce_min) over any set of axes. keep_axes is a reshape
//! on the Elixir side: the output is contiguous over the kept axes either way.
use super::*;
use crate::dtype::Dtype;
use crate::shaders::{self, Family};
use crate::tensor::{alloc, BufferArg};
use rustler::{Atom, Env};

static REDUCE_OPS: OpTable = OpTable::new(&["sum", "product", "reduce_max", "reduce_min"]);
/// Reductions up to this many elements per output fold serially on GPUs too.
const SERIAL_REDUCTION_MAX: u64 = 64;
/// Split reductions: at least this many elements per output, at most this many outputs, in
/// chunks of SPLIT_CHUNK elements per first-pass workgroup.
const SPLIT_MIN: u64 = 65536;
const SPLIT_MAX_OUTPUTS: u64 = 4096;
/// H200 (3349be5), sum of 64 M f32, us per chunk of 4096 / 8192 / 16384 / 32768 elements:
/// 105.9 / 92.7 / 95.0 / 94.7.
const SPLIT_CHUNK: u64 = 8192;
/// Split column reductions (reduce_columns): rows per chunk at least, workgroups aimed at.
const COLUMN_CHUNK_MIN: u64 = 256;
const COLUMN_WORKGROUPS: u64 = 4096;
/// reduce.comp's workgroup (its own WG, the same on every device): one per output, a tree in
/// shared memory.
const REDUCE_WORKGROUP: u64 = 256;

/// Two passes: each (output, chunk) pair reduces SPLIT_CHUNK elements into a partial (kept in
/// the accumulator type), then each output reduces its partials. The order depends only on the
/// shape, so results stay identical across runs and batch caps.
fn split_reduce(code: u32, name: &str, dtype: Dtype, x: &BufferRef, layout: &Layout) -> Result<BufferRef> {
    let (first, second, acc_bytes) =
        split_passes(shaders::split_reduce(dtype, precise_f32()), Family::Reduce, name, dtype)?;
    let chunks = layout.n_red.div_ceil(SPLIT_CHUNK);
    let red_stride = layout.red_strides[0];
    let (mut kept_dims, mut kept_strides) = if layout.n_out == 1 {
        (vec![], vec![])
    } else {
        (layout.kept_dims.clone(), layout.kept_strides.clone())
    };
    kept_dims.push(chunks);
    kept_strides.push(SPLIT_CHUNK as i64 * red_stride);
    let partials = alloc(layout.n_out * chunks * acc_bytes)?;
    let mut push = Push::new();
    push.set(0, layout.n_out * chunks)?;
    push.set(1, SPLIT_CHUNK)?;
    push.set(2, kept_dims.len() as u64)?;
    push.set(3, 1)?;
    push.set(4, 0)?;
    push.set_dims(5, &kept_dims)?;
    push.set_strides(11, &kept_strides)?;
    push.set_dims(17, &[SPLIT_CHUNK])?;
    push.set_strides(23, &[red_stride])?;
    push.set(29, layout.n_red)?;
    push.set(30, chunks)?;
    dispatch(first, code, &[x, &partials], push, grid(layout.n_out * chunks))?;

    let out = alloc(layout.n_out * dtype.bytes())?;
    let push = partials_push(layout.n_out, chunks, chunks as i64, 1)?;
    dispatch(second, code, &[&partials, &out], push, grid(layout.n_out))?;
    Ok(out)
}

/// The two passes of a split reduction and the bytes of a partial: the variants that keep
/// partials in the accumulator type (f64 for precise f32, f32 for f16) where the dtype has them,
/// else `family`'s plain variant for both passes, its partials in the storage type.
fn split_passes(pair: Option<(Kernel, Kernel)>, family: Family, name: &str, dtype: Dtype) -> Result<(Kernel, Kernel, u64)> {
    if let Some((first, second)) = pair {
        return Ok((first, second, if precise_f32() { 8 } else { 4 }));
    }
    let plain = shaders::numeric(family, dtype, precise_f32())
        .ok_or_else(|| unsupported!("{name} on {} has no device kernel yet", dtype.name()))?;
    Ok((plain, plain, dtype.bytes()))
}

/// The push constants of a split reduction's second pass: `n_out` outputs, each folding `chunks`
/// partials; consecutive outputs' partials `out_stride` apart, one output's `chunk_stride` apart.
fn partials_push(n_out: u64, chunks: u64, out_stride: i64, chunk_stride: i64) -> Result<Push> {
    let mut push = Push::new();
    push.set(0, n_out)?;
    push.set(1, chunks)?;
    push.set(2, 1)?;
    push.set(3, 1)?;
    push.set(4, 0)?;
    push.set_dims(5, &[n_out])?;
    push.set_strides(11, &[out_stride])?;
    push.set_dims(17, &[chunks])?;
    push.set_strides(23, &[chunk_stride])?;
    Ok(push)
}

/// Column reductions (reduce_columns.comp). Few column groups over long columns leave the GPU
/// mostly idle (8192 x 8192: 256 workgroups, each thread 1024 dependent loads), so those split
/// their rows into chunks of at least COLUMN_CHUNK_MIN rows, enough for about COLUMN_WORKGROUPS
/// workgroups in all, folded into partials (in the accumulator type) that a second pass folds
/// per column. The order depends only on the shape.
fn reduce_columns(code: u32, name: &str, dtype: Dtype, x: &BufferRef, layout: &Layout) -> Result<BufferRef> {
    let groups = layout.n_out.div_ceil(32);
    let chunks = COLUMN_WORKGROUPS.div_ceil(groups).min(layout.n_red / COLUMN_CHUNK_MIN).min(u16::MAX as u64);
    let out = alloc(layout.n_out * dtype.bytes())?;
    if chunks < 2 {
        let kernel = shaders::numeric(Family::ReduceColumns, dtype, precise_f32())
            .ok_or_else(|| unsupported!("{name} on {} has no device kernel yet", dtype.name()))?;
        dispatch(kernel, code, &[x, &out], layout.push()?, grid(groups))?;
        return Ok(out);
    }
    let (first, second, acc_bytes) =
        split_passes(shaders::split_reduce_columns(dtype, precise_f32()), Family::ReduceColumns, name, dtype)?;
    let rows = layout.n_red.div_ceil(chunks);
    let chunks = layout.n_red.div_ceil(rows);
    let partials = alloc(chunks * layout.n_out * acc_bytes)?;
    let mut push = layout.push()?;
    push.set(29, rows)?;
    let mut split_groups = grid(groups);
    split_groups[2] = chunks as u32;
    dispatch(first, code, &[x, &partials], push, split_groups)?;

    let push = partials_push(layout.n_out, chunks, 1, layout.n_out as i64)?;
    dispatch(second, code, &[&partials, &out], push, grid(groups))?;
    Ok(out)
}

/// Where a reduction's elements are: outputs walk the kept axes, each output walks the reduced
/// axes (both collapsed), as the reduce kernels' push constants lay them out.
struct Layout {
    n_out: u64,
    n_red: u64,
    kept_dims: Vec<u64>,
    kept_strides: Vec<i64>,
    red_dims: Vec<u64>,
    red_strides: Vec<i64>,
}

impl Layout {
    fn of(x: &BufferRef, dtype: Dtype, shape: &[u64], axes: &[usize]) -> Result<Layout> {
        if let Some(&bad) = axes.iter().find(|&&a| a >= shape.len()) {
            return Err(arg_error!("axis {bad} is out of range for shape {shape:?}"));
        }
        let strides = contiguous_strides(shape);
        check_extent(x, dtype.bytes(), 0, shape, &strides)?;
        let (mut kept_dims, mut kept_strides, mut red_dims, mut red_strides) = (vec![], vec![], vec![], vec![]);
        for d in 0..shape.len() {
            if axes.contains(&d) {
                red_dims.push(shape[d]);
                red_strides.push(strides[d]);
            } else {
                kept_dims.push(shape[d]);
                kept_strides.push(strides[d]);
            }
        }
        let n_out = element_count(&kept_dims);
        let n_red = element_count(&red_dims);
        let (kept_dims, mut kept_strides) = collapse(&kept_dims, &[kept_strides])?;
        let (red_dims, mut red_strides) = collapse(&red_dims, &[red_strides])?;
        Ok(Layout {
            n_out,
            n_red,
            kept_dims,
            kept_strides: kept_strides.remove(0),
            red_dims,
            red_strides: red_strides.remove(0),
        })
    }

    fn push(&self) -> Result<Push> {
        let mut push = Push::new();
        push.set(0, self.n_out)?;
        push.set(1, self.n_red)?;
        push.set(2, self.kept_dims.len() as u64)?;
        push.set(3, self.red_dims.len() as u64)?;
        push.set(4, 0)?;
        push.set_dims(5, &self.kept_dims)?;
        push.set_strides(11, &self.kept_strides)?;
        push.set_dims(17, &self.red_dims)?;
        push.set_strides(23, &self.red_strides)?;
        Ok(push)
    }
}

static ARG_OPS: OpTable = OpTable::new(&["argmax", "argmin"]);

/// argmax/argmin over `axes`; indices written as `index_bytes` (4 or 8) integers.
#[rustler::nif]
#[allow(clippy::too_many_arguments)]
fn arg_reduce(
    env: Env,
    op: Atom,
    dtype: Dtype,
    x: BufferRef,
    shape: Vec<u64>,
    axes: Vec<usize>,
    tie_high: bool,
    index_bytes: u64,
) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&x])?;
    let _capture = crate::capture::scope(env);
    let (code, name) = ARG_OPS.code(env, op)?;
    let kernel = shaders::numeric(Family::ArgReduce, dtype, false)
        .ok_or_else(|| unsupported!("{name} on {} has no device kernel yet", dtype.name()))?;
    if index_bytes != 4 && index_bytes != 8 {
        return Err(unsupported!("{name} into {index_bytes}-byte indices has no device kernel"));
    }
    let layout = Layout::of(&x, dtype, &shape, &axes)?;
    if cpu_device() && layout.n_red * (shape.len() as u64 + 2) > LAVAPIPE_LOOP_BUDGET {
        return Err(unsupported!("{name} over {} elements per output exceeds what one pass can loop over on a CPU device", layout.n_red));
    }
    let out = alloc(layout.n_out * index_bytes)?;
    let spec = code | (tie_high as u32) << 1 | ((index_bytes == 8) as u32) << 2;
    dispatch(kernel, spec, &[&x, &out], layout.push()?, elementwise_groups(layout.n_out))?;
    Ok(out)
}

#[rustler::nif]
fn reduce(env: Env, op: Atom, dtype: Dtype, x: BufferArg, shape: Vec<u64>, axes: Vec<usize>) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&x])?;
    let _capture = crate::capture::scope(env);
    let (code, name) = REDUCE_OPS.code(env, op)?;
    reduce_axes(code, name, dtype, &x, &shape, &axes)
}

/// The sum of `x` (of `shape`) over `axes`, for other ops' second passes (split-K GEMM).
pub fn sum_axes(dtype: Dtype, x: &BufferRef, shape: &[u64], axes: &[usize]) -> Result<BufferRef> {
    reduce_axes(0, REDUCE_OPS.names[0], dtype, x, shape, axes)
}

fn reduce_axes(code: u32, name: &str, dtype: Dtype, x: &BufferRef, shape: &[u64], axes: &[usize]) -> Result<BufferRef> {
    let x = x.clone();
    let layout = Layout::of(&x, dtype, shape, axes)?;
    // Short reductions fold serially, one invocation per output; long ones use a workgroup per
    // output and a tree in shared memory; long ones to few outputs split in two passes so that
    // many workgroups share each output. CPU devices prefer serial (no barriers) up to the point
    // where lavapipe's loop limiter would cut the loop short (see LAVAPIPE_LOOP_BUDGET).
    let serial = if cpu_device() {
        layout.n_red * (shape.len() as u64 + 2) <= LAVAPIPE_LOOP_BUDGET
    } else {
        layout.n_red <= SERIAL_REDUCTION_MAX
    };
    // Column reductions (neighbouring outputs side by side, one reduced dim striding over them)
    // on GPUs: 32 outputs per workgroup, so each warp reads adjacent elements (reduce_columns.comp).
    let columns = !cpu_device()
        && !serial
        && layout.red_dims.len() == 1
        && layout.red_strides[0] != 1
        && layout.kept_strides.last() == Some(&1)
        && layout.n_out >= 32;
    if columns {
        return reduce_columns(code, name, dtype, &x, &layout);
    }
    let splittable = layout.red_dims.len() == 1 && layout.kept_dims.len() < MAX_RANK;
    if !serial && splittable && layout.n_red >= SPLIT_MIN && layout.n_out <= SPLIT_MAX_OUTPUTS {
        return split_reduce(code, name, dtype, &x, &layout);
    }
    if cpu_device() && !serial && layout.n_red.div_ceil(REDUCE_WORKGROUP) * (shape.len() as u64 + 2) > LAVAPIPE_LOOP_BUDGET {
        return Err(unsupported!(
            "{name} of {} elements per output exceeds what one pass can loop over on a CPU device",
            layout.n_red
        ));
    }
    let family = if serial { Family::ReduceSerial } else { Family::Reduce };
    let kernel = shaders::numeric(family, dtype, precise_f32())
        .ok_or_else(|| unsupported!("{name} on {} has no device kernel yet", dtype.name()))?;
    let out = alloc(layout.n_out * dtype.bytes())?;
    let push = layout.push()?;
    let groups = if serial { elementwise_groups(layout.n_out) } else { grid(layout.n_out) };
    dispatch(kernel, code, &[&x, &out], push, groups)?;
    Ok(out)
}

/// window_sum/product/max/min: `x` of `shape`, windows of `window` dims, with `strides`,
/// per-dim low padding `pad_low` and `dilations`; the output shape is `out_shape`.
#[rustler::nif]
#[allow(clippy::too_many_arguments)]
fn window_reduce(
    env: Env,
    op: Atom,
    dtype: Dtype,
    x: BufferRef,
    shape: Vec<u64>,
    out_shape: Vec<u64>,
    window: Vec<u64>,
    strides: Vec<u64>,
    pad_low: Vec<i64>,
    dilations: Vec<u64>,
) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&x])?;
    let _capture = crate::capture::scope(env);
    static WINDOW_OPS: OpTable = OpTable::new(&["window_sum", "window_product", "window_max", "window_min"]);
    let (code, name) = WINDOW_OPS.code(env, op)?;
    let kernel = shaders::numeric(Family::Window, dtype, precise_f32())
        .ok_or_else(|| unsupported!("{name} on {} has no device kernel yet", dtype.name()))?;
    let rank = shape.len();
    if [out_shape.len(), window.len(), strides.len(), pad_low.len(), dilations.len()].iter().any(|&l| l != rank) {
        return Err(arg_error!("{name}: every window option needs one entry per axis"));
    }
    if rank > 7 {
        return Err(unsupported!("{name} over rank {rank} (the kernel takes up to 7)"));
    }
    let fits = |v: u64| v < 65536;
    if !window.iter().chain(&strides).chain(&dilations).all(|&v| fits(v))
        || pad_low.iter().any(|&p| !(-32768..32768).contains(&p))
    {
        return Err(unsupported!("{name} with window options beyond 16 bits"));
    }
    check_extent(&x, dtype.bytes(), 0, &shape, &contiguous_strides(&shape))?;
    let count = element_count(&window);
    if cpu_device() && count * (rank as u64 + 2) > LAVAPIPE_LOOP_BUDGET {
        return Err(unsupported!("{name} over windows of {count} elements exceeds what one pass can loop over on a CPU device"));
    }
    let n = element_count(&out_shape);
    let out = alloc(n * dtype.bytes())?;
    if n == 0 {
        return Ok(out);
    }
    let mut push = Push::new();
    push.set(0, n)?;
    push.set(1, rank as u64)?;
    push.set(2, count)?;
    for d in 0..rank {
        push.set(3 + 4 * d, out_shape[d])?;
        push.set(4 + 4 * d, shape[d])?;
        push.set(5 + 4 * d, window[d] << 16 | strides[d])?;
        push.set(6 + 4 * d, dilations[d] << 16 | (pad_low[d] + 32768) as u64)?;
    }
    dispatch(kernel, code, &[&x, &out], push, elementwise_groups(n))?;
    Ok(out)
}

/// sort (values) or argsort (indices of `index_bytes` bytes) along `axis`, stable; NaN largest.
#[rustler::nif]
fn sort(env: rustler::Env, dtype: Dtype, x: BufferRef, shape: Vec<u64>, axis: usize, desc: bool, indices: bool, index_bytes: u64) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&x])?;
    let _capture = crate::capture::scope(env);
    let what = if indices { "argsort" } else { "sort" };
    let kernel = shaders::numeric(Family::Sort, dtype, false)
        .ok_or_else(|| unsupported!("{what} on {} has no device kernel yet", dtype.name()))?;
    if axis >= shape.len().max(1) {
        return Err(arg_error!("{what}: axis {axis} out of range for shape {shape:?}"));
    }
    if indices && index_bytes != 4 && index_bytes != 8 {
        return Err(unsupported!("argsort into {index_bytes}-byte indices has no device kernel"));
    }
    let shape = if shape.is_empty() { vec![1] } else { shape };
    let strides = contiguous_strides(&shape);
    check_extent(&x, dtype.bytes(), 0, &shape, &strides)?;
    let len = shape[axis];
    let (kept_dims, kept_strides): (Vec<u64>, Vec<i64>) =
        (0..shape.len()).filter(|&d| d != axis).map(|d| (shape[d], strides[d])).unzip();
    let (kept_dims, kept_strides) = collapse(&kept_dims, &[kept_strides])?;
    let n = element_count(&shape);
    let out_bytes = n * if indices { index_bytes } else { dtype.bytes() };
    let mut push = Push::new();
    push.set(0, n)?;
    push.set(1, len)?;
    push.set(2, strides[axis] as u64)?;
    push.set(3, kept_dims.len() as u64)?;
    push.set_dims(4, &kept_dims)?;
    push.set_strides(10, &kept_strides[0])?;
    if len > RANK_SORT_MAX_LEN || (cpu_device() && len * 3 > LAVAPIPE_LOOP_BUDGET) {
        if let Some(kind) = radix_kind(dtype).filter(|_| radix_pays(dtype, len, n)) {
            return radix_sort(dtype, &x, n, len, push, kind, desc, indices, index_bytes, out_bytes);
        }
        return bitonic_sort(dtype, &x, n, len, push, desc, indices, index_bytes, out_bytes);
    }
    let out = alloc(out_bytes)?;
    let spec = desc as u32 | (indices as u32) << 1 | ((index_bytes == 8) as u32) << 2;
    dispatch(kernel, spec, &[&x, &out], push, elementwise_groups(n))?;
    Ok(out)
}

/// Rows up to this long are sorted by rank (sort.comp: one dispatch, len^2 comparisons per
/// row); longer ones by the radix sort (sort_radix.comp: 3 dispatches a key byte) or the bitonic
/// network (sort_bitonic.comp: ~log2(len)^2 / 4 dispatches of len / 2 comparisons each), as
/// `radix_pays` says. On the H200 a 1 M row took 1.1 s by rank.
const RANK_SORT_MAX_LEN: u64 = 2048;

/// Elements per tile of sort_radix.comp (its TILE: 256 invocations x 8).
const RADIX_TILE: u64 = 2048;

/// Rows of up to this many tiles take sort_radix.comp's serial scan.
const SERIAL_SCAN_TILES: u64 = 16;

/// NXV_RADIX_SORT=0 (read once) sorts long rows by the bitonic network instead (to compare them).
static RADIX_SORT: once_cell::sync::Lazy<bool> =
    once_cell::sync::Lazy::new(|| crate::policy::env_switch("NXV_RADIX_SORT") != Some(false));

/// Whether the radix sort beats the bitonic network for rows of `len` (`n` elements in all).
/// The radix sort's 3 dispatches a key byte cost ~90 us on an H100 whatever the size (f32; ~180
/// for 8-byte keys), the network's log2(len)^2 / 4 passes grow with both (sort of f32, H100,
/// 2026-12-06, radix / bitonic: one row of 32 K 107 / 94 us, 64 K 98 / 116, 256 K 100 / 214;
/// 64 rows of 4096 92 / 68; 256 rows of 8192 275 / 472; s64: 128 K 180 / 146, 256 K 193 / 214).
/// CPU devices run the network a dispatch per pass, so they take the radix sort throughout.
fn radix_pays(dtype: Dtype, len: u64, n: u64) -> bool {
    let wide = dtype.bytes() == 8;
    cpu_device() || len >= if wide { 1 << 18 } else { 1 << 16 } || n >= if wide { 1 << 22 } else { 1 << 20 }
}

/// sort_radix.comp's key kind (0 unsigned, 1 signed, 2 float) for `dtype`, where the device can
/// run it: subgroup ballots in compute shaders, subgroups of 8 to 128 lanes (its per-subgroup
/// counts; a workgroup of 256 holds whole subgroups). Elsewhere the bitonic network sorts.
fn radix_kind(dtype: Dtype) -> Option<u32> {
    if !*RADIX_SORT {
        return None;
    }
    let info = &ctx().ok()?.info;
    let lanes = info.subgroup_size;
    if !info.subgroup_ballot || !(8..=128).contains(&lanes) || !lanes.is_power_of_two() {
        return None;
    }
    match dtype {
        Dtype::U8 | Dtype::U16 | Dtype::U32 | Dtype::U64 => Some(0),
        Dtype::S8 | Dtype::S16 | Dtype::S32 | Dtype::S64 => Some(1),
        Dtype::F16 | Dtype::F32 | Dtype::F64 => Some(2),
        _ => None,
    }
}

/// sort / argsort by sort_radix.comp: for each 8-bit digit of the keys, lowest first, a
/// histogram of each tile, their scan, and the stable scatter (three dispatches); the first pass
/// reads `x`, the last writes the output. `push` holds sort.comp's slots 0..16.
#[allow(clippy::too_many_arguments)]
fn radix_sort(
    dtype: Dtype,
    x: &BufferRef,
    n: u64,
    len: u64,
    mut push: Push,
    kind: u32,
    desc: bool,
    indices: bool,
    index_bytes: u64,
    out_bytes: u64,
) -> Result<BufferRef> {
    let elem_bytes = dtype.bytes();
    let kernel = if elem_bytes == 8 { shaders::sort_radix64 } else { shaders::sort_radix32 };
    let key_bytes = elem_bytes.max(4);
    let rows = n / len;
    let tiles = len.div_ceil(RADIX_TILE);
    if n > u32::MAX as u64 || rows * 256 * tiles > u32::MAX as u64 {
        return Err(unsupported!("sort of {n} elements exceeds the kernels' 32-bit indexing"));
    }
    let passes = elem_bytes as usize;
    // Pass p reads keys[p % 2] and writes keys[(p + 1) % 2], but the first reads x and the last
    // writes out: one pass (1-byte keys) touches neither pair and two passes only the second, so
    // an unused pair is bound as a placeholder of one key.
    let used = |pair: usize| passes > 2 || (passes == 2 && pair == 1);
    let pair = |pair: usize, bytes: u64| alloc(if used(pair) { n * bytes } else { bytes });
    let keys = [pair(0, key_bytes)?, pair(1, key_bytes)?];
    let ids = [pair(0, 4)?, pair(1, 4)?];
    let counts = alloc(rows * 256 * tiles * 4)?;
    let totals = alloc(rows * 256 * 4)?;
    let out = alloc(out_bytes)?;
    let flags = (desc as u32) << 2
        | (indices as u32) << 3
        | ((index_bytes == 8) as u32) << 4
        | kind << 5
        | elem_bytes.trailing_zeros() << 7;
    // Rows of few tiles scan one (row, digit) an invocation: a workgroup each ran 16 barriers for
    // a handful of counts (256 rows of 8192: 1.75 ms against the bitonic network's 0.49).
    let (scan, scan_groups) = if tiles <= SERIAL_SCAN_TILES { (1 | 512, rows) } else { (1, rows * 256) };
    push.set(0, rows)?;
    push.set(16, tiles)?;
    for pass in 0..passes {
        let (src, dst) = (pass % 2, (pass + 1) % 2);
        push.set(17, 8 * pass as u64)?;
        push.set(18, (pass == 0) as u64)?;
        push.set(19, (pass + 1 == passes) as u64)?;
        let bindings: [&BufferRef; 8] = [x, &keys[src], &ids[src], &counts, &totals, &keys[dst], &ids[dst], &out];
        for (stage, groups) in [(0, rows * tiles), (scan, scan_groups), (2, rows * tiles)] {
            dispatch_writing(kernel, flags | stage, &bindings, 5, push.clone(), grid(groups))?;
        }
    }
    Ok(out)
}

/// Pairs per workgroup of sort_bitonic.comp's local passes (its LOCAL_PAIRS).
const LOCAL_PAIRS: u64 = 1024;

/// sort / argsort by the bitonic network of sort_bitonic.comp over (key, index) pairs padded to a
/// power of two per row; `push` holds sort.comp's slots 0..16.
#[allow(clippy::too_many_arguments)]
fn bitonic_sort(
    dtype: Dtype,
    x: &BufferRef,
    n: u64,
    len: u64,
    mut push: Push,
    desc: bool,
    indices: bool,
    index_bytes: u64,
    out_bytes: u64,
) -> Result<BufferRef> {
    let kernel = shaders::numeric(Family::SortBitonic, dtype, false)
        .ok_or_else(|| unsupported!("sort on {} has no device kernel yet", dtype.name()))?;
    let rows = n / len;
    let padded = len.next_power_of_two();
    if padded > u32::MAX as u64 / 2 {
        return Err(unsupported!("sort of rows of {len} exceeds the kernels' 32-bit indexing"));
    }
    let pairs = alloc(rows * padded * 16)?;
    let flags = (desc as u32) << 2 | (indices as u32) << 3 | ((index_bytes == 8) as u32) << 4;
    push.set(16, padded)?;
    dispatch(kernel, flags, &[x, &pairs], push.clone(), elementwise_groups(rows * padded))?;
    // GPUs run the passes of distances below LOCAL_PAIRS in shared memory, one dispatch per
    // block size (all blocks up to LOCAL_PAIRS in the first). CPU devices keep a dispatch per
    // pass: lavapipe runs kernels with workgroup barriers several times slower.
    let local = !cpu_device() && padded >= LOCAL_PAIRS;
    let local_pass = |first: u64, last: u64, push: &mut Push| -> Result<()> {
        push.set(17, first)?;
        push.set(18, last)?;
        let groups = elementwise_groups(rows * padded / LOCAL_PAIRS * crate::policy::workgroup());
        dispatch(kernel, 3 | flags, &[&pairs], push.clone(), groups)
    };
    let mut block = 2;
    if local {
        local_pass(2, LOCAL_PAIRS, &mut push)?;
        block = 2 * LOCAL_PAIRS;
    }
    // The global passes of a block go two at a time (distances j and j / 2, four pairs an
    // invocation), the last one alone when their count is odd.
    let lowest = if local { LOCAL_PAIRS } else { 1 };
    while block <= padded {
        let mut distance = block / 2;
        while distance >= lowest {
            push.set(17, distance)?;
            push.set(18, block)?;
            if distance / 2 >= lowest {
                dispatch(kernel, 32 | flags, &[&pairs], push.clone(), elementwise_groups(rows * padded / 4))?;
                distance /= 4;
            } else {
                dispatch(kernel, 1 | flags, &[&pairs], push.clone(), elementwise_groups(rows * padded / 2))?;
                distance /= 2;
            }
        }
        if local {
            local_pass(block, block, &mut push)?;
        }
        block *= 2;
    }
    let out = alloc(out_bytes)?;
    dispatch(kernel, 2 | flags, &[x, &pairs, &out], push, elementwise_groups(n))?;
    Ok(out)
}

/// window_scatter_max/min: `source` (one value per window) added to `init` at each window's
/// selected element of `x`; see shaders/window_scatter.comp for the exact rules.
#[rustler::nif]
#[allow(clippy::too_many_arguments)]
fn window_scatter(
    env: rustler::Env,
    min: bool,
    dtype: Dtype,
    x: BufferRef,
    shape: Vec<u64>,
    source: BufferRef,
    source_shape: Vec<u64>,
    init: BufferRef,
    window: Vec<u64>,
    strides: Vec<u64>,
    pad_low: Vec<i64>,
) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&x, &source, &init])?;
    let _capture = crate::capture::scope(env);
    let what = if min { "window_scatter_min" } else { "window_scatter_max" };
    let kernel = shaders::numeric(Family::WindowScatter, dtype, false)
        .ok_or_else(|| unsupported!("{what} on {} has no device kernel yet", dtype.name()))?;
    let rank = shape.len();
    if [source_shape.len(), window.len(), strides.len(), pad_low.len()].iter().any(|&l| l != rank) {
        return Err(arg_error!("{what}: every window option needs one entry per axis"));
    }
    if rank > MAX_RANK || rank == 0 {
        return Err(unsupported!("{what} over rank {rank}"));
    }
    if pad_low.iter().any(|&p| p < 0) {
        return Err(unsupported!("{what} with negative padding"));
    }
    check_extent(&x, dtype.bytes(), 0, &shape, &contiguous_strides(&shape))?;
    check_extent(&source, dtype.bytes(), 0, &source_shape, &contiguous_strides(&source_shape))?;
    check_extent(&init, dtype.bytes(), 0, &[1], &[1])?;
    let count = element_count(&window);
    if cpu_device() && count * count * (rank as u64 + 3) > LAVAPIPE_LOOP_BUDGET {
        return Err(unsupported!("{what} over windows of {count} elements exceeds what one pass can loop over on a CPU device"));
    }
    let n = element_count(&shape);
    let out = alloc(n * dtype.bytes())?;
    let mut push = Push::new();
    push.set(0, n)?;
    push.set(1, rank as u64)?;
    for d in 0..rank {
        push.set(2 + 5 * d, shape[d])?;
        push.set(3 + 5 * d, source_shape[d])?;
        push.set(4 + 5 * d, window[d])?;
        push.set(5 + 5 * d, strides[d])?;
        push.set(6 + 5 * d, pad_low[d] as u64)?;
    }
    dispatch(kernel, min as u32, &[&x, &source, &init, &out], push, elementwise_groups(n))?;
    Ok(out)
}
