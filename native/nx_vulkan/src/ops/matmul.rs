//! dot with any contraction and batch axes, as one batched GEMM. Each operand's batch, free and
//! contracted axes are read through strides when each group collapses to a single stride (plain and
//! transposed 2-D operands always do); otherwise the operand is first copied into that order.
use super::layout::contiguous_copy;
use super::*;
use crate::dtype::Dtype;
use crate::shaders::{self, Family};
use crate::tensor::{alloc, BufferArg};

/// (size, stride) of `axes` of a tensor with `shape` and `strides`, if walking them in order is a
/// single stride; an empty group is (1, 0).
fn group(shape: &[u64], strides: &[i64], axes: &[usize]) -> Option<(u64, i64)> {
    let live: Vec<usize> = axes.iter().copied().filter(|&a| shape[a] != 1).collect();
    let size = axes.iter().map(|&a| shape[a]).product();
    match live.last() {
        None => Some((size, 0)),
        Some(&last) => {
            let ok = live.windows(2).all(|w| strides[w[0]] == strides[w[1]] * shape[w[1]] as i64);
            ok.then_some((size, strides[last]))
        }
    }
}

/// The operand as [batch, first, second] groups: `(offset-0 buffer, [(size, stride); 3])`,
/// copying it into that order first when a group is not a single stride. A lazy transpose is
/// read from its base through its strides (the GEMMs take transposed operands as they are);
/// views that repeat elements (broadcasts) are copied, as the vector loads assume none.
fn as_groups(
    elem_bytes: u64,
    x: &BufferRef,
    shape: &[u64],
    groups: [&[usize]; 3],
) -> Result<(BufferRef, [(u64, i64); 3])> {
    let (x, strides) = match x.lazy_parts() {
        Some((base, dims, strides)) if dims == shape && dims.iter().zip(&strides).all(|(&d, &s)| s != 0 || d == 1) => {
            (base, strides)
        }
        _ => (x.clone(), contiguous_strides(shape)),
    };
    check_extent(&x, elem_bytes, 0, shape, &strides)?;
    let direct: Option<Vec<(u64, i64)>> = groups.iter().map(|g| group(shape, &strides, g)).collect();
    if let Some(g) = direct {
        return Ok((x, [g[0], g[1], g[2]]));
    }
    let order: Vec<usize> = groups.iter().flat_map(|g| g.iter().copied()).collect();
    let dims: Vec<u64> = order.iter().map(|&a| shape[a]).collect();
    let src_strides: Vec<i64> = order.iter().map(|&a| strides[a]).collect();
    let out = contiguous_copy(elem_bytes, &x, 0, &src_strides, &dims)?;
    let sizes: Vec<u64> = groups.iter().map(|g| g.iter().map(|&a| shape[a]).product()).collect();
    Ok((out, [
        (sizes[0], (sizes[1] * sizes[2]) as i64),
        (sizes[1], sizes[2] as i64),
        (sizes[2], 1),
    ]))
}

#[rustler::nif]
#[allow(clippy::too_many_arguments)]
fn dot(
    env: rustler::Env,
    dtype: Dtype,
    a: BufferArg,
    a_shape: Vec<u64>,
    a_contract: Vec<usize>,
    a_batch: Vec<usize>,
    b: BufferArg,
    b_shape: Vec<u64>,
    b_contract: Vec<usize>,
    b_batch: Vec<usize>,
) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&a, &b])?;
    let _capture = crate::capture::scope(env);
    let valid = |shape: &[u64], axes: &[usize]| axes.iter().all(|&x| x < shape.len());
    if !valid(&a_shape, &a_contract) || !valid(&a_shape, &a_batch) || !valid(&b_shape, &b_contract) || !valid(&b_shape, &b_batch) {
        return Err(arg_error!("dot axes out of range"));
    }
    let free = |shape: &[u64], c: &[usize], bt: &[usize]| -> Vec<usize> {
        (0..shape.len()).filter(|d| !c.contains(d) && !bt.contains(d)).collect()
    };
    let a_free = free(&a_shape, &a_contract, &a_batch);
    let b_free = free(&b_shape, &b_contract, &b_batch);
    let eb = dtype.bytes();
    let (a_buf, [(batch, a_bs), (m, a_ms), (k, a_ks)]) = as_groups(eb, &a, &a_shape, [&a_batch, &a_free, &a_contract])?;
    let (b_buf, [(b_batch_n, b_bs), (k2, b_ks), (n, b_ns)]) = as_groups(eb, &b, &b_shape, [&b_batch, &b_contract, &b_free])?;
    if k != k2 || batch != b_batch_n {
        return Err(arg_error!("dot: contracted or batch sizes differ ({k} vs {k2}, {batch} vs {b_batch_n})"));
    }
    if batch * m * n == 0 {
        return alloc(batch * m * n * eb);
    }
    // Each operand's whole buffer: a transpose's base is as large as the view.
    let a = Operand { buf: &a_buf, count: a_buf.bytes / eb, strides: [a_bs, a_ms, a_ks] };
    let b = Operand { buf: &b_buf, count: b_buf.bytes / eb, strides: [b_bs, b_ks, b_ns] };
    if dtype == Dtype::BF16 {
        bf16_gemm(&a, &b, batch, m, n, k)
    } else {
        gemm(dtype, &a, &b, batch, m, n, k)
    }
}

/// A GEMM operand: its buffer (offset 0), the elements its strides span, and its strides
/// ([batch, M, K] for A, [batch, K, N] for B).
struct Operand<'a> {
    buf: &'a BufferRef,
    count: u64,
    strides: [i64; 3],
}

/// The batch of M x N results of `a` times `b` (neither empty) into a new contiguous buffer,
/// by the kernel the device and shape call for.
fn gemm(dtype: Dtype, a: &Operand, b: &Operand, batch: u64, m: u64, n: u64, k: u64) -> Result<BufferRef> {
    let eb = dtype.bytes();
    let (a_buf, [a_bs, a_ms, a_ks]) = (a.buf, a.strides);
    let (b_buf, [b_bs, b_ks, b_ns]) = (b.buf, b.strides);
    // On CPU devices the barrier-free variants, unless their K loop would exceed lavapipe's loop
    // budget (the tiled kernel walks K in 16-wide steps, 17 loop iterations per step):
    // gemm_rows4 where its vectors line up and its grid (blocks of 4 rows on the second axis)
    // fits the device's dispatch limits, else gemm_rows, whose grid takes any count.
    let rows4 = if cpu_device() {
        rows4_layout(dtype, batch, m, n, k, [a_bs, a_ms, a_ks], [b_bs, b_ks, b_ns])
            .filter(|_| matches!(gemm_grid(Family::GemmRows4, batch, m, n), Some(Ok(_))))
    } else {
        None
    };
    let family = if !cpu_device() {
        gpu_gemm_variant(dtype, batch, m, n, dtype == Dtype::F16 && coop_usable())
    } else if k <= LAVAPIPE_LOOP_BUDGET / 2 {
        if rows4.is_some() {
            Family::GemmRows4
        } else {
            Family::GemmRows
        }
    } else if k.div_ceil(16) * 17 <= LAVAPIPE_LOOP_BUDGET {
        Family::Gemm
    } else {
        return Err(unsupported!("dot contracting {k} elements exceeds what one pass can loop over on a CPU device"));
    };
    let kernel = shaders::numeric(family, dtype, precise_dot())
        .ok_or_else(|| unsupported!("dot on {} has no device kernel yet", dtype.name()))?;
    let out = alloc(batch * m * n * eb)?;
    let mut push = gemm_push(batch, m, n, k, [a_bs, a_ms, a_ks], [b_bs, b_ks, b_ns])?;
    if family == Family::Gemm && !cpu_device() {
        if let Some(splits) = k_splits(dtype, batch, m, n, k) {
            // Split-K: the S chunks of K as a batch of S GEMMs into S partial products, then
            // their sum (a column reduction over the batch axis).
            let chunk = k / splits;
            let partial = alloc(splits * m * n * eb)?;
            push.set(3, splits)?;
            push.set(2, chunk)?;
            push.set_strides(5, &[chunk as i64 * a_ks, a_ms, a_ks])?;
            push.set_strides(9, &[chunk as i64 * b_ks, b_ks, b_ns])?;
            let groups = [n.div_ceil(16) as u32, m.div_ceil(16) as u32, splits as u32];
            dispatch(kernel, 0, &[a_buf, b_buf, &partial], push, groups)?;
            return super::reduce::sum_axes(dtype, &partial, &[splits, m * n], &[0]);
        }
    }
    let (family, kernel) = if family == Family::Gemm && !cpu_device() && gemm_ksplit_fits(dtype, batch, m, n, k) {
        let split = shaders::numeric(Family::GemmKSplit, dtype, false);
        split.map_or((family, kernel), |split| (Family::GemmKSplit, split))
    } else {
        (family, kernel)
    };
    let (op, groups) = if family == Family::GemmCoop {
        let block = coop_block(batch, m, n, [a_bs, a_ms, a_ks], [b_bs, b_ks, b_ns]);
        let (rows, cols) = coop_shape(block);
        (block, block_grid([n.div_ceil(cols), m.div_ceil(rows), batch], || format!("a GEMM of {m}x{n} (batch {batch})")))
    } else {
        let groups = gemm_grid(family, batch, m, n).ok_or_else(|| unsupported!("dot has no kernel of {family:?}"))?;
        (rows4.filter(|_| family == Family::GemmRows4).unwrap_or(0), groups)
    };
    dispatch(kernel, op, &[a_buf, b_buf, &out], push, groups?)?;
    Ok(out)
}

/// gemm.comp's push constants (the GEMM kernels' and their helpers'): sizes, then each operand's
/// offset (0) and strides ([batch, M, K] for A, [batch, K, N] for B).
fn gemm_push(batch: u64, m: u64, n: u64, k: u64, a: [i64; 3], b: [i64; 3]) -> Result<Push> {
    let mut push = Push::new();
    push.set_dims(0, &[m, n, k, batch, 0])?;
    push.set_strides(5, &a)?;
    push.set(8, 0)?;
    push.set_strides(9, &b)?;
    Ok(push)
}

/// A bf16 GEMM: on the f16 tensor cores where the device has them and the shape is theirs
/// (`bf16_tensor_cores`), else as every other bf16 op computes, through f32: the operands widened
/// exactly, the f32 GEMM, its result cast as Nx casts.
fn bf16_gemm(a: &Operand, b: &Operand, batch: u64, m: u64, n: u64, k: u64) -> Result<BufferRef> {
    if !cpu_device() && !precise_dot() && m >= 128 && n >= 128 && coop_bf16_usable() {
        if let Some(out) = bf16_tensor_cores(a, b, batch, m, n, k)? {
            return Ok(out);
        }
    }
    let widen = |x: &Operand| super::convert::convert(Dtype::BF16, Dtype::F32, x.buf, x.count);
    let (a32, b32) = (widen(a)?, widen(b)?);
    let c32 = gemm(
        Dtype::F32,
        &Operand { buf: &a32, ..*a },
        &Operand { buf: &b32, ..*b },
        batch,
        m,
        n,
        k,
    )?;
    super::convert::convert(Dtype::F32, Dtype::BF16, &c32, batch * m * n)
}

/// bf16 on the f16 tensor cores (cuBLAS-class GPUs multiply bf16 natively; Vulkan's tensor-core
/// path, through the glslang Debian ships, takes f16 only). bf16 keeps f32's exponent range in 8
/// significant bits, so each operand line (a row of A, a column of B: the K values one output
/// reads from it) is scaled by a power of two that takes its largest value to f16's top binade,
/// where every value of the line within 29 binades of it is an f16 exactly (bf16_scale.comp); the
/// f32 sums of the tensor cores, times the two scales' inverse, are then what an f32 GEMM of the
/// same values gives up to the order of its sums. Lines that cannot be scaled so (a NaN, an
/// infinity, a subnormal, or values spread over more binades) are marked on the device, and their
/// outputs computed from the bf16 values by gemm_bf16_fixup.comp, which returns at once when there
/// are none: no host read decides anything. Eight dispatches: the lines' ranges cleared, each
/// operand's ranges and scaled copy, the GEMM's f32 sums, their bf16 results, the fix-up. None
/// where a grid does not fit the device (the f32 path then). H100, 4096^3, GPU time per kernel
/// (15ff162): copies 137 us, GEMM 977 (the f16 GEMM's 940), bf16 results 81, the rest 10; in all
/// 1204 us against 4226 through f32. (The bf16 results made inside the GEMM's own epilogue, per
/// output from the line scales, slowed the GEMM to 1339-1367 us; not kept.)
fn bf16_tensor_cores(a: &Operand, b: &Operand, batch: u64, m: u64, n: u64, k: u64) -> Result<Option<BufferRef>> {
    // Each operand as lines of K: A's rows, B's columns. bf16_scale.comp walks it in tiles along
    // its unit-stride axis (LFAST: the lines, as A transposed or B row-major; else K) and copies
    // it in that order: ((line stride, K stride) of the copy, tiles).
    let walk = |line_stride: i64, k_stride: i64, lines: u64| {
        let lfast = line_stride == 1 && k_stride != 1;
        let tiles = batch * lines.div_ceil(64) * k.div_ceil(64);
        (lfast, tiles, if lfast { (1, lines as i64) } else { (k as i64, 1) })
    };
    let (a_lfast, a_tiles, (a_ms, a_ks)) = walk(a.strides[1], a.strides[2], m);
    let (b_lfast, b_tiles, (b_ns, b_ks)) = walk(b.strides[2], b.strides[1], n);
    let a_strides = [(m * k) as i64, a_ms, a_ks];
    let b_strides = [(n * k) as i64, b_ks, b_ns];
    let block = coop_block(batch, m, n, a_strides, b_strides);
    let (rows, cols) = coop_shape(block);
    let fits = a_tiles.max(b_tiles).max(batch * m) <= MAX_GRID_GROUPS;
    let gemm_groups = block_grid([n.div_ceil(cols), m.div_ceil(rows), batch], String::new).ok();
    let Some(gemm_groups) = gemm_groups.filter(|_| fits) else {
        return Ok(None);
    };
    let ctl_words = 1 + 2 * batch * (m + n);
    let ctl = alloc(ctl_words * 4)?;
    let mut clear = Push::new();
    clear.set(0, ctl_words)?;
    dispatch(shaders::fill_b4, 0, &[&ctl], clear, elementwise_groups(ctl_words))?;
    // Per operand: the lines' ranges, then (every line's range known) the scaled copy.
    let scaled = |x: &Operand, lines: u64, strides: [i64; 3], lfast: bool, tiles: u64, first_line: u64| -> Result<BufferRef> {
        let copy = alloc(batch * lines * k * 2)?;
        let mut push = Push::new();
        push.set(0, lines)?;
        push.set(1, k)?;
        push.set(2, batch)?;
        push.set(3, 0)?;
        push.set_strides(4, &strides)?;
        push.set(7, first_line)?;
        let mode = lfast as u32;
        dispatch_writing(shaders::bf16_scale, mode, &[x.buf, &copy, &ctl], 1, push.clone(), grid(tiles))?;
        dispatch_writing(shaders::bf16_scale, mode | 2, &[x.buf, &copy, &ctl], 2, push, grid(tiles))?;
        Ok(copy)
    };
    let a16 = scaled(a, m, a.strides, a_lfast, a_tiles, 0)?;
    let b16 = scaled(b, n, [b.strides[0], b.strides[2], b.strides[1]], b_lfast, b_tiles, batch * m)?;
    let out = alloc(batch * m * n * 2)?;
    let sums = alloc(batch * m * n * 4)?;
    let push = gemm_push(batch, m, n, k, a_strides, b_strides)?;
    dispatch(shaders::gemm_coop_f32out, block, &[&a16, &b16, &sums], push.clone(), gemm_groups)?;
    let groups = grid((batch * m * n.div_ceil(8)).div_ceil(256));
    dispatch(shaders::bf16_unscale, 0, &[&sums, &ctl, &out], push, groups)?;
    let push = gemm_push(batch, m, n, k, a.strides, b.strides)?;
    dispatch(shaders::gemm_bf16_fixup, 0, &[a.buf, b.buf, &ctl, &out], push, grid(batch * m))?;
    Ok(Some(out))
}

/// The most workgroups `grid` lays out (65535 x 65535).
const MAX_GRID_GROUPS: u64 = 65535 * 65535;

/// gemm_rows4.comp's layout (its specialization constant: bit 0, A's 16-byte vectors run along K,
/// else along M; bit 1, B's along K, else along N) for a GEMM of 4-byte elements whose operands
/// (offset 0; strides [batch, M, K] and [batch, K, N]) it can read as whole aligned vectors: K a
/// multiple of 4, each operand stride 1 along the dim it vectorises, that dim's size a multiple
/// of 4 unless it is K, and every other stride a non-negative multiple of 4. None: gemm_rows.comp.
/// The conditions are the same for the swapped, transposed operands (peephole.rs), whose layout
/// is this one with its bits swapped.
pub fn rows4_layout(dtype: Dtype, batch: u64, m: u64, n: u64, k: u64, a: [i64; 3], b: [i64; 3]) -> Option<u32> {
    let aligned = |s: i64| s >= 0 && s % 4 == 0;
    if dtype.bytes() != 4 || k % 4 != 0 || !(batch == 1 || (aligned(a[0]) && aligned(b[0]))) {
        return None;
    }
    let a_bit = if a[2] == 1 && aligned(a[1]) {
        1
    } else if a[1] == 1 && m % 4 == 0 && aligned(a[2]) {
        0
    } else {
        return None;
    };
    let b_bit = if b[1] == 1 && aligned(b[2]) {
        2
    } else if b[2] == 1 && n % 4 == 0 && aligned(b[1]) {
        0
    } else {
        return None;
    };
    Some(a_bit | b_bit)
}

/// The grid of a GEMM family with gemm.comp's push constants over a batch of M x N outputs
/// (None for other families), or an unsupported error past the device's dispatch limits: blocks
/// of 16x16 (gemm.comp), 64x64, 128x128 or 128 rows by 64 columns (gemm_tiled.comp), or
/// gemm_rows.comp's one invocation per 2 x 4 outputs, gemm_rows4.comp's blocks of 16 rows by 128
/// columns, or gemm_ksplit's 8x8 blocks.
pub fn gemm_grid(family: Family, batch: u64, m: u64, n: u64) -> Option<Result<[u32; 3]>> {
    let (rows, cols) = match family {
        Family::GemmRows => return Some(Ok(elementwise_groups(batch * m.div_ceil(2) * n.div_ceil(4)))),
        Family::GemmRows4 => (16, 128),
        Family::Gemm => (16, 16),
        Family::GemmKSplit => (8, 8),
        Family::GemmTiled | Family::GemmTiled84 => (64, 64),
        Family::GemmTiled8 => (128, 128),
        Family::GemmTiledTall => (128, 64),
        _ => return None,
    };
    Some(block_grid([n.div_ceil(cols), m.div_ceil(rows), batch], || format!("a GEMM of {m}x{n} (batch {batch})")))
}

/// The GEMM family a kernel of gemm.comp's push constants belongs to, by the kernel's name
/// (peephole.rs rewrites their dispatches). Not the tensor-core kernel: its grid is the same,
/// but the rewrite is not tested there.
pub fn gemm_family(name: &str) -> Option<Family> {
    match name.rsplit_once('_')?.0 {
        "gemm" => Some(Family::Gemm),
        "gemm_ksplit" => Some(Family::GemmKSplit),
        "gemm_tiled" => Some(Family::GemmTiled),
        "gemm_tiled84" => Some(Family::GemmTiled84),
        "gemm_tiled8" => Some(Family::GemmTiled8),
        "gemm_tiled_tall" => Some(Family::GemmTiledTall),
        "gemm_rows" => Some(Family::GemmRows),
        "gemm_rows4" => Some(Family::GemmRows4),
        _ => None,
    }
}

/// How many K chunks a skinny GEMM on a GPU splits into, if any: a single GEMM whose 16x16 tiles
/// are too few to fill the GPU (the large MNIST step's 512x2048x10 makes 32 workgroups that
/// each walk K = 2048) and whose K divides into chunks of at least 128. Only 4-byte element types
/// (f32 partials are what the one-pass kernel accumulates anyway; integers wrap the same in any
/// order); the sum's order depends only on the shape.
fn k_splits(dtype: Dtype, batch: u64, m: u64, n: u64, k: u64) -> Option<u64> {
    let tiles = m.div_ceil(16) * n.div_ceil(16);
    if batch != 1 || dtype.bytes() != 4 || precise_dot() || tiles >= SPLIT_K_TILES {
        return None;
    }
    [32u64, 16, 8, 4, 2]
        .into_iter()
        .find(|&s| k % s == 0 && k / s >= 128 && tiles * s <= 2 * SPLIT_K_TILES)
        .filter(|&s| tiles * s >= SPLIT_K_TILES / 2)
}

/// Whether a GEMM on the 16x16-tile kernel takes gemm_ksplit (8x8 tiles, sixteen slices of each
/// workgroup walking a part of K each, summed in the workgroup): few tiles over a long K, with a
/// 32-bit accumulator (f64 ones keep gemm.comp's single walk: precise_dot promises its order).
fn gemm_ksplit_fits(dtype: Dtype, batch: u64, m: u64, n: u64, k: u64) -> bool {
    let wide_accumulator = dtype.bytes() == 8 || (precise_dot() && matches!(dtype, Dtype::F32 | Dtype::F16));
    !wide_accumulator && k >= KSPLIT_MIN_K && batch * m.div_ceil(16) * n.div_ceil(16) < SPLIT_K_TILES / 2
}
/// K from which gemm_ksplit pays: a 32-wide chunk for most of its sixteen slices.
const KSPLIT_MIN_K: u64 = 256;

/// Workgroups from which a GEMM fills the GPU without splitting K (about 2 per multiprocessor
/// of a large GPU).
const SPLIT_K_TILES: u64 = 256;

/// Whether gemm_coop.comp's pipelines build on this device, tried once: where they do not, the
/// reason stays (stats/0's `gemm_coop`) and f16 GEMMs take the register-blocked kernel. The same
/// for the bf16 kernels (bf16_tensor_cores: bf16 GEMMs then go through f32). Per device.
static COOP: [once_cell::sync::OnceCell<std::result::Result<(), String>>; crate::context::MAX_DEVICES] =
    [const { once_cell::sync::OnceCell::new() }; crate::context::MAX_DEVICES];
static COOP_BF16: [once_cell::sync::OnceCell<std::result::Result<(), String>>; crate::context::MAX_DEVICES] =
    [const { once_cell::sync::OnceCell::new() }; crate::context::MAX_DEVICES];

/// gemm_coop.comp's block shapes (its specialization constant, see the shader) by the name
/// NXV_GEMM_COOP takes to force one.
pub const COOP_BLOCKS: [(u32, &str); 3] = [(0, "128x128"), (2, "128x128/2"), (1, "128x256")];

/// Rows and columns of a tensor-core block.
fn coop_shape(block: u32) -> (u64, u64) {
    (128, 128 << (block & 1))
}

/// The tensor-core block for a batch of M x N outputs from operands of strides a ([batch, M, K])
/// and b ([batch, K, N]): the forced one, else by layout and shape. H200, one call (GPU time,
/// f16, us with 128x128 / 128x128 in two stages / 128x256 blocks): operands read as whole
/// 16-byte vectors (a unit stride, the other strides multiples of 8) 4096^3 1012 / 1224 / 940,
/// with A or B transposed 989 / 1202 / 938 and 1057 / 1251 / 1011, batched 16x1024^3 263 / 326
/// / 254, 1024^3 48.4 / 42.0 / 68.1, 300x200x5000 336 / 306 / 404; gathered halves (4001 x 3999
/// x 4003) 1916 / 3189 / 2264. So: gathering operands 128x128; vectors 128x256 where there are
/// enough of those blocks to fill a large GPU, else two stages of 128x128.
fn coop_block(batch: u64, m: u64, n: u64, a: [i64; 3], b: [i64; 3]) -> u32 {
    if let Some(block) = crate::policy::gemm_coop_forced() {
        return block;
    }
    let vectors = |s: [i64; 3]| {
        let whole = |x: i64| x % 8 == 0;
        (batch == 1 || whole(s[0])) && ((s[2] == 1 && whole(s[1])) || (s[1] == 1 && whole(s[2])))
    };
    if !(vectors(a) && vectors(b)) {
        0
    } else if batch * m.div_ceil(128) * n.div_ceil(256) >= BIG_BLOCKS_MIN {
        1
    } else {
        2
    }
}

/// Builds the tensor-core pipelines (every block shape) once, waiting for them: called from
/// `configure` (a dirty NIF, at start) unless NXV_GEMM_COOP=0, so no op waits for one on a
/// normal scheduler, and which kernel an f16 GEMM takes (it decides the rounding) never depends
/// on when a pipeline got built.
pub fn probe_coop() -> Result<()> {
    if crate::policy::gemm_coop() && ctx()?.info.coopmat_f16 {
        let build = |kernels: &[(crate::pipelines::Kernel, u32, &str)]| {
            kernels.iter().try_for_each(|&(kernel, op, name)| {
                crate::pipelines::pipeline(kernel, op)
                    .and_then(|p| p.get().map(|_| ()))
                    .map_err(|e| format!("{} {name}: {e:?}", kernel.name))
            })
        };
        let blocks = |kernel: crate::pipelines::Kernel| COOP_BLOCKS.map(|(block, name)| (kernel, block, name));
        let device = crate::context::current();
        COOP[device].get_or_init(|| build(&blocks(shaders::gemm_coop_f16)));
        COOP_BF16[device].get_or_init(|| {
            build(&blocks(shaders::gemm_coop_f32out))?;
            build(&[(shaders::bf16_unscale, 0, "")])?;
            let passes = [(0, "range"), (1, "range, lines contiguous"), (2, "copy"), (3, "copy, lines contiguous")];
            build(&passes.map(|(mode, name)| (shaders::bf16_scale, mode, name)))?;
            build(&[(shaders::gemm_bf16_fixup, 0, "")])
        });
    }
    Ok(())
}

fn coop_usable() -> bool {
    crate::policy::gemm_coop() && matches!(COOP[crate::context::current()].get(), Some(Ok(())))
}

fn coop_bf16_usable() -> bool {
    crate::policy::gemm_coop() && matches!(COOP_BF16[crate::context::current()].get(), Some(Ok(())))
}

/// The tensor-core GEMM's state: "unavailable" (no cooperative matrices), "off" (not asked
/// for, NXV_GEMM_COOP), "untried", "ok", or why its pipeline failed; and why the bf16 kernels'
/// failed where only they did.
pub fn coop_status() -> String {
    let device = crate::context::current();
    match (ctx().map(|c| c.info.coopmat_f16), COOP[device].get()) {
        (Ok(false) | Err(_), _) => "unavailable".into(),
        (Ok(true), _) if !crate::policy::gemm_coop() => "off".into(),
        (Ok(true), None) => "untried".into(),
        (Ok(true), Some(Ok(()))) => match COOP_BF16[device].get() {
            Some(Err(e)) => format!("ok (bf16: {e})"),
            _ => "ok".into(),
        },
        (Ok(true), Some(Err(e))) => e.clone(),
    }
}

/// The GEMM kernel for a GPU (its grid: gemm_grid). f16 with at least 128 rows and columns takes the tensor cores (unless NXV_GEMM_COOP=0) where
/// the device has NV cooperative matrices (gemm_coop.comp, f32 accumulation in the tensor cores'
/// order). Large outputs with a 32-bit accumulator take the register-blocked kernel
/// (gemm_tiled.comp; the same sums in the same order as gemm.comp): 128x128 blocks (8x8 outputs
/// per thread) once there are enough of them to fill the GPU, else 128x64 blocks (8x4) if there
/// are enough of those, else 64x64 blocks of 128 threads (8x4). Skinny shapes (the MNIST step's
/// 32-row GEMMs) keep 16x16 tiles, and so do f64 accumulators (f64, 64-bit integers, f32/f16
/// under NXV_PRECISE_DOT): with them the 64x64 kernel measured 4x slower than the 16x16 one on
/// the H200 (2238 vs 530 us at 1024^3).
fn gpu_gemm_variant(dtype: Dtype, batch: u64, m: u64, n: u64, coopmat_f16: bool) -> Family {
    let wide_accumulator = dtype.bytes() == 8 || (precise_dot() && matches!(dtype, Dtype::F32 | Dtype::F16));
    let blocks = |rows: u64, cols: u64| batch * m.div_ceil(rows) * n.div_ceil(cols);
    if dtype == Dtype::F16 && coopmat_f16 && !wide_accumulator && m >= 128 && n >= 128 {
        Family::GemmCoop
    } else if wide_accumulator || m < 64 || n < 64 || blocks(64, 64) < TILED_MIN_BLOCKS {
        Family::Gemm
    } else if gemm_block() != 0 {
        match gemm_block() {
            128 => Family::GemmTiled8,
            65 => Family::GemmTiled84,
            129 => Family::GemmTiledTall,
            _ => Family::GemmTiled,
        }
    } else if m >= 128 && n >= 128 && blocks(128, 128) >= BIG_BLOCKS_MIN {
        Family::GemmTiled8
    } else if m >= 128 && blocks(128, 64) >= BIG_BLOCKS_MIN {
        Family::GemmTiledTall
    } else {
        Family::GemmTiled84
    }
}

/// 64x64 blocks from which GPUs take the register-blocked GEMM: below that (a 512x512 output)
/// the 16x16 kernel's 16 times more workgroups fill the GPU better. M and N must be at least 64:
/// conv's im2col GEMM (100352 x 576 x 64 for a 64->64 3x3 conv at batch 32) qualifies.
const TILED_MIN_BLOCKS: u64 = 64;

/// Blocks of 128 rows from which GPUs take them over smaller ones: about three quarters of a
/// multiprocessor each on a large GPU (the H200 has 132). H200, one call (b74ac5d), us per GEMM
/// with 64x64 blocks of 256 threads / of 128 threads / 128x64 / 128x128: 1024^3 137 / 123 / 121 /
/// 179 (128x64: 128 blocks, 128x128: 64), 512x784x2048 100 / 90 / 86 / 128 (128, 64), 784x512x2048
/// 121 / 110 / 106 / 96 (224, 112), batched 64x256^3 139 / 126 / 126 / 109 (512, 256), 2048^3
/// 831 / 769 / 725 / 580. Splitting K for 1024^3 into 4 chunks on 128x128 blocks (256
/// workgroups, then a sum of the partials) measured slower than 64x64 blocks (3349be5: 130 vs
/// 119 us; 512x784x2048 97 vs 92), so GEMMs with a 32-bit accumulator split K only when skinny
/// (k_splits).
const BIG_BLOCKS_MIN: u64 = 100;

/// The same for the implicit-GEMM conv's 128x128 blocks (groups of 128+ features). H200, one call
/// (85029ce), us with 64x64 / 128x128 blocks: 3x3 128->128 28x28 b32 414 / 385 (196 blocks of
/// 128x128), 3x3 256->256 14x14 b32 442 / 428 (98 blocks); 64-feature convs lose half of a
/// 128-row block (64->64 56x56 b32: 428 / 539).
const CONV_BIG_BLOCKS_MIN: u64 = 96;

/// 2-D convolution as an implicit GEMM (gemm_tiled.comp with CONV): `input` NCHW contiguous
/// `[n, c, h, w]`, `kernel` the weights reordered to `[f, kh, kw, c / groups]` contiguous (the
/// order in which each output sums its products), `kernel_dims` `[f, kh, kw]`; the result is
/// NCHW `[n, f, oh, ow]`. Only 32-bit accumulators (f32, f16). Padding is the low side's, signed;
/// the high side's is in `out_spatial`.
#[rustler::nif]
#[allow(clippy::too_many_arguments)]
fn conv2d(
    env: rustler::Env,
    dtype: Dtype,
    input: BufferRef,
    input_shape: Vec<u64>,
    kernel: BufferRef,
    kernel_dims: Vec<u64>,
    groups: u64,
    strides: Vec<u64>,
    padding_low: Vec<i64>,
    dilation: Vec<u64>,
    out_spatial: Vec<u64>,
) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&input, &kernel])?;
    let _capture = crate::capture::scope(env);
    let (&[n, c, h, w], &[f, kh, kw], &[sh, sw], &[ph, pw], &[dh, dw], &[oh, ow]) = (
        input_shape.as_slice(),
        kernel_dims.as_slice(),
        strides.as_slice(),
        padding_low.as_slice(),
        dilation.as_slice(),
        out_spatial.as_slice(),
    ) else {
        return Err(arg_error!("conv2d takes a rank-4 input and 2 spatial dims of kernel, strides, padding and dilation"));
    };
    if groups == 0 || c % groups != 0 || f % groups != 0 || c == 0 || kh * kw == 0 {
        return Err(arg_error!("conv2d: {c} channels and {f} features do not split into {groups} groups"));
    }
    let (cg, fg) = (c / groups, f / groups);
    let k = kh * kw * cg;
    let eb = dtype.bytes();
    check_extent(&input, eb, 0, &input_shape, &contiguous_strides(&input_shape))?;
    check_extent(&kernel, eb, 0, &[f, k], &[k as i64, 1])?;
    // NXV_GEMM_BLOCK=128 or 64 forces the block here too (the same kernel), to measure crossovers.
    let big = match gemm_block() {
        128 => true,
        0 => fg >= 128 && groups * fg.div_ceil(128) * (n * oh * ow).div_ceil(128) >= CONV_BIG_BLOCKS_MIN,
        _ => false,
    };
    let (family, tile) = if big {
        (Family::GemmConv8, 128)
    } else {
        (Family::GemmConv, 64)
    };
    // Each 16-wide K tile runs the kernel's loops about 40 times (loads, products, the channel
    // walk): on CPU devices stay under lavapipe's loop budget.
    if cpu_device() && k.div_ceil(16) * (40 + 4 * 16 / cg.min(16)) > LAVAPIPE_LOOP_BUDGET {
        return Err(unsupported!("conv2d contracting {k} elements exceeds what one pass can loop over on a CPU device"));
    }
    let kernel_fn = shaders::numeric(family, dtype, false)
        .ok_or_else(|| unsupported!("conv2d on {} has no implicit-GEMM kernel", dtype.name()))?;
    let cols = n * oh * ow;
    let out = alloc(cols * f * eb)?;
    if cols * f == 0 {
        return Ok(out);
    }
    let mut push = Push::new();
    push.set_dims(0, &[fg, cols, k, groups, 0, fg * k, k, 1, 0])?;
    push.set_dims(12, &[cg, kw, ow, oh * ow, h, w, sh, sw])?;
    push.set_strides(20, &[ph, pw])?;
    push.set_dims(22, &[dh, dw, c * h * w, h * w, f])?;
    let grid = block_grid([cols.div_ceil(tile), fg.div_ceil(tile), groups], || format!("conv2d of {cols} outputs x {f} features"))?;
    dispatch(kernel_fn, 0, &[&kernel, &input, &out], push, grid)?;
    Ok(out)
}

/// A block kernel's grid of `blocks` (columns, rows, batch), or an unsupported error naming
/// `what` when the device cannot dispatch that many.
fn block_grid(blocks: [u64; 3], what: impl Fn() -> String) -> Result<[u32; 3]> {
    let max = ctx()?.info.max_workgroup_count;
    let mut grid = [0u32; 3];
    for ((g, &b), &m) in grid.iter_mut().zip(&blocks).zip(max.iter()) {
        *g = u32::try_from(b).ok().filter(|g| *g <= m).ok_or_else(|| unsupported!("{} exceeds the device's dispatch limits", what()))?;
    }
    Ok(grid)
}

/// Triangular solve in the BinaryBackend's formulation (the Elixir side works out the flags):
/// for each batch, `a` read as M with (row, col) strides `a_strides`, the right-hand sides from
/// `b` with (row, col) strides `b_strides`, forward or `backward` substitution; the result has
/// b's layout.
#[rustler::nif]
#[allow(clippy::too_many_arguments)]
fn triangular_solve(
    env: rustler::Env,
    dtype: Dtype,
    a: BufferRef,
    b: BufferRef,
    n: u64,
    cols: u64,
    batches: u64,
    backward: bool,
    a_strides: (u64, u64),
    b_strides: (u64, u64),
) -> Result<BufferRef> {
    let _device = crate::context::use_device_of(&[&a, &b])?;
    let _capture = crate::capture::scope(env);
    let kernel = shaders::numeric(Family::TriSolve, dtype, precise_f32())
        .ok_or_else(|| unsupported!("triangular_solve on {} has no device kernel yet", dtype.name()))?;
    let eb = dtype.bytes();
    check_extent(&a, eb, 0, &[batches * n * n], &[1])?;
    check_extent(&b, eb, 0, &[batches * n * cols], &[1])?;
    if cpu_device() && n * n > LAVAPIPE_LOOP_BUDGET / 2 {
        return Err(unsupported!("triangular_solve of order {n} exceeds what one pass can loop over on a CPU device"));
    }
    let total = batches * n * cols;
    // The scratch holds W: f64 for f64 and precise f32 (and per component for complex).
    let w_bytes = match dtype {
        Dtype::F64 => 8,
        Dtype::C128 => 16,
        Dtype::C64 => if precise_f32() { 16 } else { 8 },
        Dtype::F16 => 4,
        _ => if precise_f32() { 8 } else { 4 },
    };
    let scratch = alloc(total * w_bytes)?;
    let out = alloc(total * eb)?;
    let mut push = Push::new();
    push.set(0, n)?;
    push.set(1, cols)?;
    push.set(2, batches)?;
    push.set(3, backward as u64)?;
    push.set(4, a_strides.0)?;
    push.set(5, a_strides.1)?;
    push.set(6, b_strides.0)?;
    push.set(7, b_strides.1)?;
    push.set(8, n * n)?;
    push.set(9, n * cols)?;
    dispatch(kernel, 0, &[&a, &b, &scratch, &out], push, elementwise_groups(batches * cols))?;
    Ok(out)
}
