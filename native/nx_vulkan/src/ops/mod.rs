//! Op families. Each file turns Nx's view of an op (shapes, axes, dtypes) into `Dispatch`
//! descriptions for the queue; the shared helpers here handle strided operands and push constants.
pub mod convert;
pub mod elementwise;
pub mod fft;
pub mod layout;
pub mod matmul;
pub mod reduce;

use crate::context::ctx;
use crate::error::{arg_error, unsupported, Result};
use crate::pipelines::{pipeline, Kernel};
use crate::queue::{Command, Dispatch, PUSH_WORDS};
use crate::tensor::BufferRef;
use smallvec::SmallVec;
use crate::policy::{cpu_device, gemm_block, precise_dot, precise_f32};

/// An op family's op names: an op's code is its index. The atoms are made once and then only
/// compared (every op from every scheduler looks its code up: no lock, no hash on that path).
pub struct OpTable {
    pub names: &'static [&'static str],
    atoms: std::sync::OnceLock<Vec<rustler::Atom>>,
}

impl OpTable {
    pub const fn new(names: &'static [&'static str]) -> Self {
        OpTable { names, atoms: std::sync::OnceLock::new() }
    }

    /// `op`'s code and name; an unsupported error for an op the table lacks.
    pub fn code(&'static self, env: rustler::Env, op: rustler::Atom) -> Result<(u32, &'static str)> {
        let atoms = match self.atoms.get() {
            Some(atoms) => atoms,
            None => {
                let atoms = self
                    .names
                    .iter()
                    .map(|n| rustler::Atom::from_str(env, if n.is_empty() { "nx_vulkan_none" } else { n }))
                    .collect::<rustler::NifResult<Vec<_>>>()
                    .map_err(|_| arg_error!("creating atoms"))?;
                self.atoms.get_or_init(|| atoms)
            }
        };
        match atoms.iter().position(|a| *a == op) {
            Some(i) => Ok((i as u32, self.names[i])),
            None => {
                let name = op.to_term(env).atom_to_string().unwrap_or_default();
                Err(unsupported!("{name} has no device kernel"))
            }
        }
    }
}

/// A shape from Elixir: a tuple (as Nx keeps it, so the caller converts nothing) or a list of
/// dims, decoded without a heap allocation (the binary op NIF, on every eager op's path, takes
/// three).
pub struct Shape(pub SmallVec<[u64; 8]>);

impl<'a> rustler::Decoder<'a> for Shape {
    fn decode(term: rustler::Term<'a>) -> rustler::NifResult<Self> {
        let env = term.get_env();
        let mut dims = SmallVec::new();
        if term.is_tuple() {
            let mut arity: std::os::raw::c_int = 0;
            let mut array = std::mem::MaybeUninit::uninit();
            // SAFETY: the term is a tuple of `env`; the array lives as long as the term.
            let elements = unsafe {
                if rustler::sys::enif_get_tuple(env.as_c_arg(), term.as_c_arg(), &mut arity, array.as_mut_ptr()) != 1 {
                    return Err(rustler::Error::BadArg);
                }
                std::slice::from_raw_parts(array.assume_init(), arity as usize)
            };
            for &element in elements {
                // SAFETY: an element of a tuple of `env`.
                dims.push(unsafe { rustler::Term::new(env, element) }.decode::<u64>()?);
            }
        } else {
            for element in term.into_list_iterator()? {
                dims.push(element.decode::<u64>()?);
            }
        }
        Ok(Shape(dims))
    }
}

impl std::ops::Deref for Shape {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        &self.0
    }
}

/// Ranks up to this many dims (after collapsing) fit the kernels' push constants.
pub const MAX_RANK: usize = 6;
/// The strided-copy kernel has room for more (one stride set fewer than select).
pub const MAX_COPY_RANK: usize = 8;

/// Push constants being filled slot by slot.
#[derive(Clone)]
pub struct Push {
    pub words: [u32; PUSH_WORDS],
}

impl Push {
    pub fn new() -> Self {
        Push { words: [0; PUSH_WORDS] }
    }
    pub fn set(&mut self, at: usize, value: u64) -> Result<()> {
        let v = u32::try_from(value)
            .map_err(|_| unsupported!("a size or offset ({value}) does not fit the kernels' 32-bit indexing"))?;
        self.words[at] = v;
        Ok(())
    }
    pub fn set_signed(&mut self, at: usize, value: i64) -> Result<()> {
        let v = i32::try_from(value)
            .map_err(|_| unsupported!("a stride ({value}) does not fit the kernels' 32-bit indexing"))?;
        self.words[at] = v as u32;
        Ok(())
    }
    /// Writes `values` at `at..`, padding nothing (unused slots stay 0).
    pub fn set_dims(&mut self, at: usize, values: &[u64]) -> Result<()> {
        values.iter().enumerate().try_for_each(|(i, &v)| self.set(at + i, v))
    }
    pub fn set_strides(&mut self, at: usize, values: &[i64]) -> Result<()> {
        values.iter().enumerate().try_for_each(|(i, &v)| self.set_signed(at + i, v))
    }
}

pub fn element_count(shape: &[u64]) -> u64 {
    shape.iter().product()
}

pub fn contiguous_strides(shape: &[u64]) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    let mut acc = 1i64;
    for d in (0..shape.len()).rev() {
        strides[d] = acc;
        acc *= shape[d] as i64;
    }
    strides
}

/// Strides that read `shape` (contiguous) as if broadcast to `out` (Nx rules: dims right-aligned,
/// each equal or 1): stride 0 on broadcast axes, so nothing is materialised.
pub fn broadcast_strides(shape: &[u64], out: &[u64]) -> Result<Vec<i64>> {
    broadcast_strides_from(shape, &contiguous_strides(shape), out)
}

/// The same for an operand laid out with strides `own` (a lazy view's, into its base).
pub fn broadcast_strides_from(shape: &[u64], own: &[i64], out: &[u64]) -> Result<Vec<i64>> {
    if shape.len() > out.len() {
        return Err(arg_error!("cannot broadcast shape {shape:?} to {out:?}"));
    }
    let lead = out.len() - shape.len();
    (0..out.len())
        .map(|d| {
            if d < lead {
                return Ok(0);
            }
            let s = shape[d - lead];
            if s == out[d] {
                Ok(if s == 1 { 0 } else { own[d - lead] })
            } else if s == 1 {
                Ok(0)
            } else {
                Err(arg_error!("cannot broadcast shape {shape:?} to {out:?}"))
            }
        })
        .collect()
}

/// Drops size-1 dims and merges neighbouring dims that every operand walks contiguously, so most
/// elementwise work runs at rank 1. Returns the new dims and each operand's strides.
pub fn collapse(dims: &[u64], strides: &[Vec<i64>]) -> Result<(Vec<u64>, Vec<Vec<i64>>)> {
    collapse_to(dims, strides, MAX_RANK)
}

/// `collapse` with a kernel-specific rank limit.
pub fn collapse_to(dims: &[u64], strides: &[Vec<i64>], max_rank: usize) -> Result<(Vec<u64>, Vec<Vec<i64>>)> {
    let mut out_dims: Vec<u64> = Vec::with_capacity(dims.len());
    let mut out_strides: Vec<Vec<i64>> = vec![Vec::with_capacity(dims.len()); strides.len()];
    for d in 0..dims.len() {
        if dims[d] == 1 {
            continue;
        }
        let mergeable = !out_dims.is_empty()
            && strides
                .iter()
                .zip(out_strides.iter())
                .all(|(s, o)| *o.last().unwrap() == s[d] * dims[d] as i64);
        if mergeable {
            *out_dims.last_mut().unwrap() *= dims[d];
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                *o.last_mut().unwrap() = s[d];
            }
        } else {
            out_dims.push(dims[d]);
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                o.push(s[d]);
            }
        }
    }
    if out_dims.is_empty() {
        out_dims.push(1);
        for o in out_strides.iter_mut() {
            o.push(0);
        }
    }
    if out_dims.len() > max_rank {
        return Err(unsupported!(
            "rank {} after collapsing dims exceeds the kernel's limit of {max_rank}",
            out_dims.len()
        ));
    }
    Ok((out_dims, out_strides))
}

/// Checks that every element a strided read or write can touch lies inside the buffer, so a wrong
/// shape is an ArgumentError, never an out-of-bounds GPU access.
pub fn check_extent(buf: &BufferRef, elem_bytes: u64, offset: i64, dims: &[u64], strides: &[i64]) -> Result<()> {
    if dims.contains(&0) {
        return Ok(()); // nothing is touched
    }
    let (mut lo, mut hi) = (offset, offset);
    for (&d, &s) in dims.iter().zip(strides) {
        let reach = (d as i64 - 1) * s;
        if reach < 0 { lo += reach } else { hi += reach }
    }
    let elements = (buf.bytes / elem_bytes) as i64;
    if lo < 0 || hi >= elements.max(1) {
        return Err(arg_error!(
            "access [{lo}, {hi}] is outside a buffer of {elements} elements (shape/buffer mismatch)"
        ));
    }
    Ok(())
}

/// `check_extent` for a contiguous operand of `shape` read from offset 0 (no stride vector built:
/// this runs on every binary op).
pub fn check_contiguous(buf: &BufferRef, elem_bytes: u64, shape: &[u64]) -> Result<()> {
    let count = element_count(shape);
    let elements = buf.bytes / elem_bytes;
    if count > elements.max(1) {
        return Err(arg_error!(
            "access [0, {}] is outside a buffer of {elements} elements (shape/buffer mismatch)",
            count - 1
        ));
    }
    Ok(())
}

/// A 2-D grid of workgroups with at least `n` invocations of an element-per-invocation kernel
/// (they compute `x + y * groups_x * workgroup` and skip indices past `n`): x up to 65535 groups,
/// y as many rows as needed.
pub fn elementwise_groups(n: u64) -> [u32; 3] {
    grid(n.div_ceil(crate::policy::workgroup()))
}

/// At least `groups` workgroups laid out as a 2-D grid (for one-output-per-workgroup kernels).
pub fn grid(groups: u64) -> [u32; 3] {
    let groups = groups.max(1);
    let x = groups.min(65535);
    [x as u32, groups.div_ceil(x) as u32, 1]
}

/// Queues one dispatch of `kernel` (specialized with `op`) over `bindings`, the last written.
pub fn dispatch(kernel: Kernel, op: u32, bindings: &[&BufferRef], push: Push, groups: [u32; 3]) -> Result<()> {
    dispatch_writing(kernel, op, bindings, 1, push, groups)
}

/// The same for a kernel that writes its last `writes` bindings.
pub fn dispatch_writing(kernel: Kernel, op: u32, bindings: &[&BufferRef], writes: usize, push: Push, groups: [u32; 3]) -> Result<()> {
    record(kernel.name, pipeline(kernel, op)?, bindings, writes, push, groups)
}

/// Queues an element-wise kernel over `n` elements: a kernel that visits several elements per
/// invocation (specialization constant 2) gets a grid that many times smaller, and one that runs
/// the contiguous case a 4-element vector at a time (`vector`, only for `Kernel::vectorized`
/// kernels whose operands allow it) 4 times smaller again.
pub fn dispatch_elements(kernel: Kernel, op: u32, bindings: &[&BufferRef], push: Push, n: u64, vector: bool) -> Result<()> {
    dispatch_units(kernel, op, bindings, push, if vector { n.div_ceil(4) } else { n })
}

/// The same for a kernel whose invocations each take `units` steps in all (several elements a
/// step, as the kernel says).
pub fn dispatch_units(kernel: Kernel, op: u32, bindings: &[&BufferRef], push: Push, units: u64) -> Result<()> {
    let pipeline = pipeline(kernel, op)?;
    let groups = elementwise_groups(units.div_ceil(pipeline.per_invocation as u64));
    record(kernel.name, pipeline, bindings, 1, push, groups)
}

fn record(
    name: &'static str,
    pipeline: crate::pipelines::PipelineRef,
    bindings: &[&BufferRef],
    writes: usize,
    push: Push,
    groups: [u32; 3],
) -> Result<()> {
    let buffers: SmallVec<[_; 4]> = bindings.iter().map(|b| b.get()).collect::<Result<_>>()?;
    let dispatch = Dispatch::new(name, pipeline, buffers, push.words, groups, writes);
    record_command(Command::Dispatch(dispatch), bindings)
}

/// Queues an op's command over `bindings` (its output last): the output inherits the inputs'
/// deferred checks, then the command goes to the capture or the queue.
pub fn record_command(command: Command, bindings: &[&BufferRef]) -> Result<()> {
    if let Some((out, inputs)) = bindings.split_last() {
        crate::checks::inherit(out, inputs)?;
    }
    crate::capture::record(command, bindings)
}

/// The storage-type variant of a byte-moving kernel family for an element width.
pub fn by_width(elem_bytes: u64, b1: Kernel, b2: Kernel, b4: Kernel, b8: Kernel) -> Result<Kernel> {
    match elem_bytes {
        1 => Ok(b1),
        2 => Ok(b2),
        4 => Ok(b4),
        8 => Ok(b8),
        other => Err(unsupported!("no kernel moves {other}-byte elements")),
    }
}

/// llvmpipe (lavapipe) silently ends any shader loop after 65535 iterations, counting nested
/// loops too (measured: a serial sum over 65536 elements stopped after 21845 of them). Kernels
/// with data-dependent loops stay under this budget on CPU devices or take another variant.
pub const LAVAPIPE_LOOP_BUDGET: u64 = 60_000;
