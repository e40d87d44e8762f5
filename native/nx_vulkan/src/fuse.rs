//! Fusion of a compiled program's element-wise chains (capture.rs calls `fuse` once per program).
//!
//! A run of consecutive f32 unary/binary dispatches (computed in f64 or in f32, as the device's
//! precision policy has them: never both in one kernel) over the same element count, where each
//! reads the previous ones' results at its own element index, becomes one generated kernel: each
//! op calls the same GLSL function its own kernel calls (unary_ops.glsl, binary_ops.glsl, whose
//! arithmetic is `precise`, so no fma joins two ops), rounds to the storage type as that kernel's
//! store would, and hands the value to the next op in a register. So results are bit for bit
//! those of the unfused commands; what goes away is a dispatch, a barrier and a round trip
//! through memory per op. Results other commands (or the program's caller) read are written too
//! (up to MAX_OUTPUTS per kernel); the others stay in registers.
//!
//! A serial reduction takes part too: the ops that compute its input (a prologue) run inside its
//! loop at each element it folds, and the ops on its result (an epilogue) after the loop. So a
//! stable log-sum-exp is two kernels (max with the logits' add before it; sum with the shift and
//! exp before it and the log after), and the count of a row's maxima in the gradient of
//! reduce_max (compare, cast to u32, integer sum, cast to f32) one.
//!
//! Kernels are generated as GLSL with the shapes, offsets and strides written in, compiled with
//! shaderc (tens of ms, on the dirty scheduler `capture_end` runs on), cached by source for the
//! VM's life and as SPIR-V in the pipeline cache's directory for the next start; their
//! pipelines go through the same builder threads and on-disk pipeline cache.
use crate::context::ctx;
use crate::error::{Error, Result};
use crate::pipeline_disk_cache;
use crate::pipelines::{self, PipelineRef};
use crate::policy::env_switch;
use crate::queue::{handle, Command, Dispatch, PUSH_WORDS};
use dashmap::DashMap;
use once_cell::sync::Lazy;
use smallvec::SmallVec;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use vulkano::buffer::Subbuffer;
use vulkano::shader::{ShaderModule, ShaderModuleCreateInfo};

/// NXV_FUSE=0 (read once) leaves programs unfused (and unrewritten: peephole.rs).
pub(crate) static FUSE_OFF: Lazy<bool> = Lazy::new(|| env_switch("NXV_FUSE") == Some(false));
/// NXV_GEMM_EPILOGUE=0 (read once) leaves GEMMs out of fusion (to measure what epilogues save).
static EPILOGUES_OFF: Lazy<bool> = Lazy::new(|| env_switch("NXV_GEMM_EPILOGUE") == Some(false));
/// NXV_REDUCE_PROLOGUES (read once): `1` fuses reduction prologues on GPUs too, `0` on no device
/// (default: CPU devices only; `run` says why).
static PROLOGUES: Lazy<Option<bool>> = Lazy::new(|| env_switch("NXV_REDUCE_PROLOGUES"));
/// The most buffers a fused kernel reads (push descriptors allow 32 in all on every device here).
const MAX_INPUTS: usize = 8;
/// The most ops in one fused kernel, and the most results it writes.
const MAX_OPS: usize = 32;
const MAX_OUTPUTS: usize = 4;

static KERNELS: Lazy<DashMap<(usize, String, u32), PipelineRef>> = Lazy::new(DashMap::new);

/// The compute type of an op's arithmetic, from its kernel: f64 for the precise f32 kernels
/// (shaders.rs's F32P: f32 math in f64, rounded once; the default on lavapipe and the H200), f32
/// for the plain ones (F32: the other GPU classes, or NXV_PRECISE=0). A generated kernel takes
/// the defines of its members' kernels, so one kernel never mixes the two. Comparisons (exact in
/// either), selects, copies, converts and integer sums compute nothing that depends on it.
#[derive(Clone, Copy, PartialEq)]
enum Compute {
    F64,
    F32,
    /// binary_s32 / binary_u32 and compare_s32 / compare_u32: 32-bit integer arithmetic (wrapping,
    /// Nx's quotient and remainder, shifts), as their own kernels compute it. Such ops share a
    /// kernel only with ops of their own type (`compatible`).
    S32,
    U32,
}

impl Compute {
    /// The dtype defines of the kernels whose arithmetic computes in this type (shaders.rs's).
    fn defines(self) -> &'static str {
        match self {
            Compute::F64 => "#define T float\n#define W double\n#define PRECISE 1\n#define MATH64 1\n",
            Compute::F32 => "#define T float\n#define W float\n",
            Compute::S32 => "#define T int\n#define W int\n#define IS_INT 1\n#define IS_SIGNED 1\n#define BITS 32\n\
                             #define T_MIN (-2147483647 - 1)\n#define T_MAX 2147483647\n",
            Compute::U32 => "#define T uint\n#define W uint\n#define IS_INT 1\n#define BITS 32\n\
                             #define T_MIN 0u\n#define T_MAX 4294967295u\n",
        }
    }

    fn integer(self) -> bool {
        matches!(self, Compute::S32 | Compute::U32)
    }

    /// The GLSL type T stands for in its kernels.
    fn storage(self) -> &'static str {
        match self {
            Compute::F64 | Compute::F32 => "float",
            Compute::S32 => "int",
            Compute::U32 => "uint",
        }
    }
}

/// Whether ops computing in `a` and `b` may share a kernel: integer ops only with ops of their
/// own type (the others hold f32 values in T), float ones with the same type or with ops that
/// compute nothing type-dependent (None).
fn compatible(a: Option<Compute>, b: Option<Compute>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => x == y,
        (Some(x), None) | (None, Some(x)) => !x.integer(),
        (None, None) => true,
    }
}

/// A generated kernel's conversion of an op's result to the storage type: a float's NaN
/// canonical, as the ops' own kernels store it; an integer's as it is.
const RESULT_FN: &str = "#ifdef IS_INT\nT result(W r) { return T(r); }\n#else\nT result(W r) { return CANONICAL_NAN(T, r); }\n#endif\n";

/// What a fused op is, from its kernel's name.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// unary_f32p or unary_f32: T -> T.
    Unary,
    /// binary_f32p or binary_f32: T, T -> T.
    Binary,
    /// compare_f32: T, T -> a predicate (u8 in memory).
    Compare,
    /// select_b4: predicate, 4-byte value, 4-byte value -> the value chosen, its bits copied (held
    /// as a float in the kernel: a load, a select and a store move bits and compute nothing, so
    /// any 4-byte type comes through unchanged; only f32 ops read it as a number).
    Select,
    /// convert of an s32 (u32) to an 8- or 16-bit integer: its low bits, as convert.comp keeps
    /// them, in an integer kernel of its input's type (compute S32 or U32), from a register.
    Narrow,
    /// convert from an 8, 16 or 32-bit integer to f32, s32 or u32 (`op` is convert.comp's
    /// in * 16 + out): the integer widened to 64 bits and converted as convert.comp does (to f32
    /// exact up to 2^24; to a 32-bit integer its low 32 bits, held as a uint).
    Convert,
    /// copy_b4 into a whole contiguous result (a broadcast, transpose or slice materialized):
    /// its input's bits through an offset and strides, held as a select's are.
    Copy,
    /// copy_starts_b4, a slice or put_slice with tensor starts (copy.comp's STARTS variant): as
    /// Copy, with the starts' clamped offset (dynamic_start.glsl, from the start tensors' words)
    /// added to the input's offset (a slice, into a whole contiguous result) or to the output's
    /// (a put_slice: a scatter into part of its result). A stage of its own for `merge` only
    /// (`alone`): a put_slice's result is not at the op's index, and its starts are read words.
    CopyStarts,
    /// A transfer command copying a whole buffer's 4-byte words (CPU devices make put_slice's
    /// copy of its target one, where a dispatch would be copy_b4): element i to element i, for
    /// `merge` only (`alone`: a memcpy is lavapipe's fastest copy), so that a put_slice into the
    /// copy can join the same merged kernel.
    Transfer,
    /// A device loop's state copy (loops.rs): a buffer's 4-byte words copied element i to element
    /// i, as uints whatever the kernel's type (so it joins kernels of any: `Stage::neutral`). The
    /// state update is gated: it copies where the loop's flag (a u32, a first operand read at
    /// element 0) is not zero, as copy_multi.comp's GATED variant does; a copy aside (of a state
    /// tensor the body returns in another slot) is not. Made by `state_copy`, for `merge` only
    /// (`alone`), so that an iteration's copies join the merged kernel of its last level.
    StateCopy,
    /// reduce_serial_f32p or reduce_serial_f32, or the sum of reduce_serial_s32/u32 (wrapping
    /// adds, held as a uint): one output per invocation folding its reduced elements in order.
    /// Its push constants (its layout) become the fused kernel's; members before it compute its
    /// input elements (a prologue, inside its loop), those after it work on its result at the
    /// output's index (an epilogue).
    Reduce,
    /// A GEMM of f32 operands into a contiguous f32 result (gemm.comp, gemm_rows.comp,
    /// gemm_rows4.comp, gemm_tiled.comp, the implicit-GEMM convolution too), as a run's first
    /// member only: the members after it (an epilogue: a bias, an activation, a gradient's mask)
    /// run on each result where the GEMM stores it (its STORE_C), at the result's index, so a
    /// dense or conv layer is one kernel and one level of the program instead of two.
    Gemm,
}

/// Whether a dispatch is a GEMM an epilogue can follow: one of the f32 GEMM kernels that store
/// through STORE_C, writing batch x M x N results (pc[3], pc[0], pc[1]; a convolution's groups x
/// features per group x output pixels) in its last binding.
fn gemm(d: &Dispatch) -> bool {
    let kernel = d.pipeline.kernel();
    !*EPILOGUES_OFF
        && d.name.starts_with("gemm")
        && kernel.source.contains("STORE_C(")
        && kernel.defines.contains(&("T", "float"))
        && d.bindings().len() == 3
        && d.writes == 1
}

/// What a fused op is, and the type its arithmetic computes in (None: it computes nothing that
/// depends on it), from its kernel's name.
fn kind(name: &str) -> Option<(Kind, Option<Compute>)> {
    use Compute::*;
    Some(match name {
        "unary_f32p" | "unary_f32p_v4" => (Kind::Unary, Some(F64)),
        "unary_f32" => (Kind::Unary, Some(F32)),
        "binary_f32p" => (Kind::Binary, Some(F64)),
        "binary_f32" => (Kind::Binary, Some(F32)),
        "binary_s32" => (Kind::Binary, Some(S32)),
        "binary_u32" => (Kind::Binary, Some(U32)),
        "compare_f32" => (Kind::Compare, None),
        "compare_s32" => (Kind::Compare, Some(S32)),
        "compare_u32" => (Kind::Compare, Some(U32)),
        "select_b4" => (Kind::Select, None),
        "convert" => (Kind::Convert, None),
        "copy_b4" => (Kind::Copy, None),
        "copy_starts_b4" => (Kind::CopyStarts, None),
        "reduce_serial_f32p" => (Kind::Reduce, Some(F64)),
        "reduce_serial_f32" => (Kind::Reduce, Some(F32)),
        "reduce_serial_s32" | "reduce_serial_u32" => (Kind::Reduce, None),
        _ => return None,
    })
}

/// Whether a dispatch's kernel is one a run may take (window_fuse.rs's first filter: names only,
/// no parsing; `fuse` decides).
pub fn joinable(d: &Dispatch) -> bool {
    d.name.starts_with("gemm") || kind(d.name).is_some_and(|(k, _)| k != Kind::CopyStarts)
}

/// The GLSL type of a convert's input, by convert.comp's type code (ops/convert.rs): the
/// integers of 8 to 32 bits, into f32, s32 or u32 (codes 0, 6, 10) only.
fn convert_input(op: u32) -> Option<&'static str> {
    if !matches!(op % 16, 0 | 6 | 10) {
        return None;
    }
    Some(match op / 16 {
        4 => "int8_t",
        5 => "int16_t",
        6 => "int",
        8 => "uint8_t",
        9 => "uint16_t",
        10 => "uint",
        _ => return None,
    })
}

/// A convert (convert.comp's op: in * 16 + out) of a 32-bit integer to an 8- or 16-bit one: the
/// compute type of its input, and the GLSL type of its output.
fn narrow(op: u32) -> Option<(Compute, &'static str)> {
    let compute = match op / 16 {
        6 => Compute::S32,
        10 => Compute::U32,
        _ => return None,
    };
    let out = match op % 16 {
        4 => "int8_t",
        5 => "int16_t",
        8 => "uint8_t",
        9 => "uint16_t",
        _ => return None,
    };
    Some((compute, out))
}

/// How an op reads an operand: at its own element index, or through an offset and strides over
/// the op's dims (broadcasts, transposed views).
#[derive(Clone, PartialEq)]
enum Access {
    Linear,
    /// A reduction's input, read through its own push constants.
    Reduced,
    /// A GEMM's operand, read by the GEMM's own code.
    Gemm,
    Strided {
        offset: i64,
        dims: SmallVec<[u64; 6]>,
        strides: SmallVec<[i64; 6]>,
    },
}

/// One element-wise dispatch, read back from its push constants (the headers of unary.comp,
/// binary.comp and select.comp give the layouts).
#[derive(Clone)]
struct Elementwise {
    kind: Kind,
    op: u32,
    n: u64,
    /// Operands: (buffer, access).
    operands: SmallVec<[(Subbuffer<[u8]>, Access); 3]>,
    out: Subbuffer<[u8]>,
    push: [u32; PUSH_WORDS],
    /// A 32-bit integer result (an integer sum, a convert into s32 or u32), held as a uint.
    integer: bool,
    /// The type its arithmetic computes in (`kind`).
    compute: Option<Compute>,
    /// A GEMM's kernel and workgroups (its push constants are `push`).
    gemm: Option<(PipelineRef, [u32; 3])>,
    /// A CopyStarts' tensor starts: (buffer, type code, largest start, stride it moves by), as
    /// copy.comp's push constants give them; its output's access (a put_slice's scatter).
    starts: SmallVec<[Start; 4]>,
    out_access: Access,
}

/// A tensor start of a dynamic slice: its buffer, its type code (dynamic_start.glsl's: bits 0-1
/// log2 of its bytes, bit 2 signed), the largest start it clamps to and the stride it moves by.
#[derive(Clone)]
struct Start {
    buffer: Subbuffer<[u8]>,
    code: u32,
    max: u32,
    stride: i32,
}

impl Elementwise {
    /// Whether the result is a predicate (u8 in memory) rather than an f32.
    fn predicate(&self) -> bool {
        self.kind == Kind::Compare
    }

    /// A stage of its own: never a member of a fused run (see Kind::CopyStarts, Kind::Transfer).
    fn alone(&self) -> bool {
        matches!(self.kind, Kind::CopyStarts | Kind::Transfer | Kind::StateCopy)
    }

    /// An op whose code uses neither T nor W (a convert into s32 or u32, from an integer or a
    /// predicate), so it joins runs of any compute type.
    fn neutral(&self) -> bool {
        self.kind == Kind::Convert && self.integer
    }

    /// Where the result of index i is stored (a put_slice's scatter: elsewhere).
    fn stored_at(&self, k: usize) -> String {
        match self.kind {
            Kind::CopyStarts if self.op == 1 => format!("uint(int({}) + off{k})", index(&self.out_access, "i")),
            _ => "i".into(),
        }
    }

    /// The GLSL type of the result in memory and in its register.
    fn stored(&self) -> &'static str {
        match self.kind {
            Kind::Compare => "uint8_t",
            Kind::Narrow => narrow(self.op).map_or("uint", |(_, out)| out),
            _ if self.integer => "uint",
            _ => "T",
        }
    }
}

fn parse(command: &Command) -> Option<Elementwise> {
    if let Command::Copy { src, dst, bytes } = command {
        return (bytes % 4 == 0 && *bytes > 0).then(|| Elementwise {
            kind: Kind::Transfer,
            op: 0,
            n: bytes / 4,
            operands: SmallVec::from_vec(vec![(src.clone(), Access::Linear)]),
            out: dst.clone(),
            push: [0; PUSH_WORDS],
            integer: false,
            compute: None,
            gemm: None,
            starts: SmallVec::new(),
            out_access: Access::Linear,
        });
    }
    let Command::Dispatch(d) = command else { return None };
    if gemm(d) {
        let pc = &d.push;
        let n = pc[0] as u64 * pc[1] as u64 * pc[3] as u64;
        let out = d.bindings()[2].clone();
        if out.size() < n * 4 {
            return None;
        }
        let operands = SmallVec::from_vec(vec![(d.bindings()[0].clone(), Access::Gemm), (d.bindings()[1].clone(), Access::Gemm)]);
        let gemm = Some((d.pipeline, d.groups));
        return Some(Elementwise {
            kind: Kind::Gemm,
            op: d.pipeline.op(),
            n,
            operands,
            out,
            push: d.push,
            integer: false,
            compute: None,
            gemm,
            starts: SmallVec::new(),
            out_access: Access::Linear,
        });
    }
    let (kind, compute) = match (kind(d.name)?, narrow(d.pipeline.op())) {
        ((Kind::Convert, _), Some((compute, _))) => (Kind::Narrow, Some(compute)),
        (kind, _) => kind,
    };
    let pc = &d.push;
    let n = pc[0] as u64;
    let out = d.bindings().last()?.clone();
    // An operand through an offset at pc[offset_at] and strides at pc[strides_at..] over the
    // dims at pc[dims_at..] (rank at pc[1]).
    let through = |offset_at: usize, dims_at: usize, strides_at: usize| {
        let rank = pc[1] as usize;
        if rank > 6 {
            return None;
        }
        let dims: SmallVec<[u64; 6]> = pc[dims_at..dims_at + rank].iter().map(|&v| v as u64).collect();
        let strides: SmallVec<[i64; 6]> = pc[strides_at..strides_at + rank].iter().map(|&v| v as i32 as i64).collect();
        Some(strided(pc[offset_at] as i32 as i64, &dims, &strides))
    };
    let b = |k: usize| d.bindings()[k].clone();
    let operands: SmallVec<[(Subbuffer<[u8]>, Access); 3]> = match kind {
        Kind::Unary if d.bindings().len() == 2 => SmallVec::from_vec(vec![(b(0), Access::Linear)]),
        Kind::Binary | Kind::Compare if d.bindings().len() == 3 => {
            let access = |offset_at: usize, strides_at: usize| {
                if kind == Kind::Binary && pc[22] == 1 {
                    // The vector path: rank 1, offset 0, stride 1 (linear) or 0 (element 0).
                    return Some(if pc[strides_at] == 1 { Access::Linear } else { strided(0, &[n], &[0]) });
                }
                through(offset_at, 4, strides_at)
            };
            SmallVec::from_vec(vec![(b(0), access(2, 10)?), (b(1), access(3, 16)?)])
        }
        Kind::Select if d.bindings().len() == 4 => {
            SmallVec::from_vec(vec![(b(0), through(2, 5, 11)?), (b(1), through(3, 5, 17)?), (b(2), through(4, 5, 23)?)])
        }
        Kind::Convert if d.bindings().len() == 2 && convert_input(d.pipeline.op()).is_some() => {
            SmallVec::from_vec(vec![(b(0), Access::Linear)])
        }
        Kind::Narrow if d.bindings().len() == 2 => SmallVec::from_vec(vec![(b(0), Access::Linear)]),
        // Only where it writes element i of its output at its own index i (offset 0, row-major
        // strides): then it is an element-wise op whose operand is read through strides.
        Kind::Copy if d.bindings().len() == 2 && through(3, 4, 20) == Some(Access::Linear) => {
            SmallVec::from_vec(vec![(b(0), through(2, 4, 12)?)])
        }
        // A slice with tensor starts into a whole contiguous result, or a put_slice's scatter:
        // bindings 1..4 are the starts (unused ones repeat binding 1).
        Kind::CopyStarts if d.bindings().len() == 6 && pc[1] <= 4 => {
            let on_output = d.pipeline.op() == 1;
            let out_access = through(3, 4, 12)?;
            if !on_output && out_access != Access::Linear {
                return None;
            }
            let count = (pc[16] & 0xff) as usize;
            if !(1..=4).contains(&count) {
                return None;
            }
            let starts = (0..count)
                .map(|k| Start { buffer: b(1 + k), code: (pc[16] >> (8 + 4 * k)) & 0xf, max: pc[17 + k], stride: pc[21 + k] as i32 })
                .collect();
            return Some(Elementwise {
                kind,
                op: on_output as u32,
                n,
                operands: SmallVec::from_vec(vec![(b(0), through(2, 4, 8)?)]),
                out,
                push: d.push,
                integer: false,
                compute,
                gemm: None,
                starts,
                out_access,
            });
        }
        // Integer reductions: sums only (max and min compare by signedness, which a uint does not say).
        Kind::Reduce if d.bindings().len() == 2 && (compute.is_some() || d.pipeline.op() == 0) => {
            SmallVec::from_vec(vec![(b(0), Access::Reduced)])
        }
        _ => return None,
    };
    let op = d.pipeline.op();
    let integer = match kind {
        Kind::Convert => op % 16 != 0,
        Kind::Reduce => compute.is_none(),
        _ => false,
    };
    Some(Elementwise {
        kind,
        op,
        n,
        operands,
        out,
        push: d.push,
        integer,
        compute,
        gemm: None,
        starts: SmallVec::new(),
        out_access: Access::Linear,
    })
}

/// An access through strides, or Linear when the strides are the dims' own (row-major, offset 0).
fn strided(offset: i64, dims: &[u64], strides: &[i64]) -> Access {
    let mut expected = 1i64;
    let mut contiguous = offset == 0;
    for (&dim, &stride) in dims.iter().zip(strides).rev() {
        contiguous &= stride == expected || dim == 1;
        expected *= dim as i64;
    }
    if contiguous {
        Access::Linear
    } else {
        Access::Strided { offset, dims: dims.into(), strides: strides.into() }
    }
}

/// Fuses the element-wise runs of `commands`; `escapes` are buffers read outside the program (its
/// outputs), which must be written. Returns the commands and how many fused kernels replaced
/// how many dispatches. A run that fails to compile stays unfused.
///
/// A run's kernel takes the place of its first member, so a member may come from up to MAX_SKIP
/// commands further on when it depends on none of the commands it then passes, and none of them
/// touches what it writes (capture order interleaves independent chains: a reduction's between a
/// comparison and the cast of its result, say).
pub fn fuse(commands: Vec<Command>, escapes: &HashSet<u64>) -> (Vec<(Command, Option<Stage>)>, usize, usize) {
    if *FUSE_OFF {
        return (commands.into_iter().map(|c| (c, None)).collect(), 0, 0);
    }
    // How many commands read each buffer: an intermediate only its run reads need not be written.
    let mut readers: HashMap<u64, usize> = HashMap::new();
    for command in &commands {
        for r in command.accesses().0 {
            *readers.entry(r).or_default() += 1;
        }
    }
    let mut parsed: Vec<Option<Elementwise>> = commands.iter().map(parse).collect();
    let levels = written_levels(&commands);
    // Where the kernel of each fused command goes: its run's first member's place.
    let mut placed: Vec<Option<usize>> = vec![None; commands.len()];
    let mut kernels_at: HashMap<usize, (Command, Option<Stage>)> = HashMap::new();
    let (mut kernels, mut replaced) = (0, 0);
    let is_gemm = |i: usize| parsed[i].as_ref().is_some_and(|e| e.kind == Kind::Gemm);
    // GEMMs first: the ops on a GEMM's result become its epilogue even where capture order put
    // one of them (a gradient's mask, say) before the GEMM, where an element-wise run starting
    // there would take them.
    for gemms in [true, false] {
        for i in 0..commands.len() {
            if placed[i].is_some() || is_gemm(i) != gemms {
                continue;
            }
            let members = run(&commands, &parsed, &levels, &placed, i, &readers, escapes);
            let run: Vec<&Elementwise> = members.iter().filter_map(|&k| parsed[k].as_ref()).collect();
            if members.len() < 2 {
                continue;
            }
            if let Ok(kernel) = fused_command(&run, &readers, escapes) {
                kernels_at.insert(i, kernel);
                kernels += 1;
                replaced += members.len();
                for k in members {
                    placed[k] = Some(i);
                }
            }
        }
    }
    let mut out = Vec::with_capacity(commands.len());
    for (i, command) in commands.into_iter().enumerate() {
        match kernels_at.remove(&i) {
            Some(kernel) => out.push(kernel),
            // An op left alone is a run of one for `merge` (a GEMM's is not).
            None if placed[i].is_none() => {
                let alone = parsed[i].take().filter(|e| e.kind != Kind::Gemm);
                out.push((command, alone.map(|e| Stage { members: vec![e], written: vec![0] })));
            }
            None => {}
        }
    }
    (out, kernels, replaced)
}

/// NXV_MERGE=0 (read once) leaves the small commands of a program in their own dispatches.
static MERGE_OFF: Lazy<bool> = Lazy::new(|| env_switch("NXV_MERGE") == Some(false));
/// NXV_MERGE_TYPES=0 (read once) keeps integer stages out of merged kernels of other types
/// (`merged_command`'s sections).
static MIXED: Lazy<bool> = Lazy::new(|| env_switch("NXV_MERGE_TYPES") != Some(false));
/// The largest index space (elements, or a reduction's outputs) of a merged stage, and the most
/// elements its reductions fold: one workgroup then takes about as long as a dispatch costs.
const MERGE_ELEMENTS: u64 = 2048;
const MERGE_FOLDS: u64 = 16384;
/// The invocations of a merged kernel's workgroup: on GPUs 512, so that a phase of a few hundred
/// results is one step for each (H200, 2026-12-04, the MNIST step's merged kernel: 12.0 us with 256,
/// 11.0 with 512, 11.5 with 1024); on CPU devices the element-wise kernels' size (lavapipe runs a
/// workgroup's invocations in turn).
fn merge_workgroup() -> Result<u64> {
    let most = ctx()?.info.max_workgroup_invocations as u64;
    Ok(if crate::policy::cpu_device() { crate::policy::workgroup() } else { 512 }.min(most))
}

/// The most bytes of shared memory a merged kernel's copies of its stages' results take.
const MERGE_SHARED_BYTES: u64 = 32768;
/// The most stages in a merged kernel, and the most buffers it binds (push descriptors: 32).
const MERGE_STAGES: usize = 32;
const MERGE_BINDINGS: usize = 32;

/// Merges small element-wise kernels and serial reductions (`Stage`s) of consecutive dependency
/// levels into one kernel of one workgroup that runs them phase by phase, a workgroup barrier
/// between phases (stages that do not depend on each other share a phase), each result later
/// stages read also kept in shared memory (a phase's chain of loads then waits on L1, not L2:
/// on the H200 the MNIST step's 14 stages took 16.9 us in turn, 15.6 in 9 phases, 11.0 with
/// shared copies). A small command costs a GPU a dispatch and a barrier (2-5 us on the H200) for well
/// under a microsecond of work; a loss and its gradient (log-softmax over a batch's classes, say)
/// are a dozen such in a row. Each stage computes as its own kernel does (the same generated
/// code, an invocation per result), so results are bit for bit the unmerged program's; what
/// goes is the launches and the barriers between them. Returns the commands, how many merged
/// kernels replaced how many commands, and how many results they keep in shared memory. A group
/// that fails to compile stays unmerged.
///
/// A stage joins a group only if every command it depends on is a member or at a level below the
/// group's first: then no other command lies between two members, and the merged kernel can
/// take its first member's place in level order.
pub fn merge(commands: Vec<(Command, Option<Stage>)>) -> (Vec<Command>, usize, usize, usize) {
    let (commands, stages): (Vec<Command>, Vec<Option<Stage>>) = commands.into_iter().unzip();
    if !merging() {
        return (commands, 0, 0, 0);
    }
    let levels = crate::queue::levels(&commands);
    let mut order: Vec<usize> = (0..commands.len()).collect();
    order.sort_by_key(|&i| levels[i]);
    let depends = dependencies(&commands);
    let small = |i: usize| stages[i].as_ref().filter(|s| s.small());
    let mut grouped = vec![false; commands.len()];
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (at, &first) in order.iter().enumerate() {
        let Some(stage) = small(first).filter(|_| !grouped[first]) else { continue };
        let start = levels[first];
        // The members' compute type, and whether any member's code is typed (all but the
        // neutral state copies: those join any kernel); with sections of several types
        // (`merge_mixed`), only the float type, of which a kernel has one.
        let (mut compute, mut typed) = (stage.compute(), !stage.neutral());
        let mut float = stage.compute().filter(|c| !c.integer());
        let (reads, writes) = commands[first].accesses();
        let mut bound: HashSet<u64> = reads.into_iter().chain(writes).collect();
        let mut members = vec![first];
        for &next in &order[at + 1..] {
            let Some(stage) = small(next).filter(|_| !grouped[next] && members.len() < MERGE_STAGES) else { continue };
            let (reads, writes) = commands[next].accesses();
            let ready = depends[next].iter().all(|d| members.contains(d) || levels[*d] < start);
            let same_type = match stage.compute() {
                _ if *MIXED => stage.compute().filter(|c| !c.integer()).is_none_or(|c| float.is_none_or(|f| f == c)),
                c => stage.neutral() || !typed || compatible(compute, c),
            };
            let more = reads.iter().chain(&writes).filter(|h| !bound.contains(h)).collect::<HashSet<_>>().len();
            if ready && same_type && bound.len() + more <= MERGE_BINDINGS {
                compute = compute.or(stage.compute());
                typed |= !stage.neutral();
                float = float.or(stage.compute().filter(|c| !c.integer()));
                bound.extend(reads.into_iter().chain(writes));
                members.push(next);
            }
        }
        if members.len() > 1 {
            members.iter().for_each(|&m| grouped[m] = true);
            groups.push(members);
        }
    }
    // How many commands of the program write each buffer.
    let mut writers: HashMap<u64, usize> = HashMap::new();
    for command in &commands {
        command.accesses().1.into_iter().for_each(|w| *writers.entry(w).or_default() += 1);
    }
    let mut merged: HashMap<usize, Command> = HashMap::new();
    let (mut kernels, mut replaced, mut shared) = (0, 0, 0);
    // Each member's phase: one past the latest phase of the members it depends on, so stages
    // that do not depend on each other share a phase (and a barrier).
    let phases = |members: &[usize]| -> Vec<usize> {
        let mut phases: Vec<usize> = Vec::with_capacity(members.len());
        for &m in members {
            let after = depends[m].iter().filter_map(|d| members.iter().position(|x| x == d)).map(|k| phases[k] + 1);
            phases.push(after.max().unwrap_or(0));
        }
        phases
    };
    for mut members in groups {
        let mut attempt = 0;
        loop {
            let group: Vec<(&Stage, usize)> =
                members.iter().map(|&m| stages[m].as_ref().expect("members are stages")).zip(phases(&members)).collect();
            match merged_command(&group, &writers) {
                Ok((command, copies)) => {
                    kernels += 1;
                    replaced += members.len();
                    shared += copies;
                    merged.insert(members[0], command);
                    break;
                }
                Err(_) => {
                    members.iter().for_each(|&m| grouped[m] = false);
                    // State copies that cannot read their sources as words (a narrow result of
                    // the same kernel) leave the group, which is tried once more without them.
                    let typed: Vec<usize> =
                        members.iter().copied().filter(|&m| stages[m].as_ref().is_some_and(|s| !s.neutral())).collect();
                    if attempt > 0 || typed.len() == members.len() || typed.len() < 2 {
                        break;
                    }
                    typed.iter().for_each(|&m| grouped[m] = true);
                    members = typed;
                    attempt += 1;
                }
            }
        }
    }
    let mut commands: Vec<Option<Command>> = commands.into_iter().map(Some).collect();
    let out = order
        .into_iter()
        .filter_map(|i| match merged.remove(&i) {
            Some(kernel) => Some(kernel),
            None if grouped[i] => None,
            None => commands[i].take(),
        })
        .collect();
    (out, kernels, replaced, shared)
}

/// The commands each command depends on (queue.rs's `levels` counts the same): the last to write
/// what it reads, and the last to write and those since to read what it writes (a buffer may be
/// written by several: a pad's fill, then its interior).
fn dependencies(commands: &[Command]) -> Vec<SmallVec<[usize; 4]>> {
    let mut last_writer: HashMap<u64, usize> = HashMap::new();
    let mut readers_since: HashMap<u64, SmallVec<[usize; 4]>> = HashMap::new();
    let mut depends = Vec::with_capacity(commands.len());
    for (i, command) in commands.iter().enumerate() {
        let (reads, writes) = command.accesses();
        let mut on: SmallVec<[usize; 4]> = reads.iter().filter_map(|r| last_writer.get(r)).copied().collect();
        for w in &writes {
            on.extend(last_writer.get(w).copied());
            on.extend(readers_since.remove(w).unwrap_or_default());
        }
        for r in reads {
            readers_since.entry(r).or_default().push(i);
        }
        for w in writes {
            last_writer.insert(w, i);
        }
        depends.push(on);
    }
    depends
}

/// One dispatch of one workgroup running `stages` phase by phase (each stage with its phase):
/// the stages of a phase share one index space (each its own range of it), a workgroup barrier
/// ends each phase. Also returns how many results it keeps in shared memory.
fn merged_command(stages: &[(&Stage, usize)], writers: &HashMap<u64, usize>) -> Result<(Command, usize)> {
    // The kernel's sections: one compute type each (`sections`), each stage computing in its
    // own. With more than one, every section includes the ops' headers under its own defines
    // (their functions overload on W), the bindings take concrete types, and each stage's code
    // sits between its section's defines.
    let sections = sections(stages);
    let mixed = sections.len() > 1;
    let section = |stage: &Stage| stage.compute().filter(|c| c.integer()).unwrap_or(sections[0]);
    // Bodies in member order (which reads and writes which binding is settled in that order),
    // twice: the first pass finds which results later stages read, the second reads those from
    // shared copies where they fit.
    let bodies = |bindings: &mut Bindings| -> Result<Vec<String>> {
        stages
            .iter()
            .map(|(stage, _)| {
                bindings.stage_n = stage.n();
                bindings.t = if mixed { section(stage).storage() } else { "" };
                stage.body(bindings)
            })
            .collect()
    };
    let mut bindings = Bindings::default();
    bodies(&mut bindings)?;
    // Room for math64.glsl's tables and the compiler's own, within what every device offers.
    let budget = (ctx()?.info.max_shared_memory as u64).saturating_sub(1024).min(MERGE_SHARED_BYTES);
    bindings.share(budget, |h| writers.get(&h) == Some(&1));
    let shared = std::mem::take(&mut bindings.shared);
    let copies = shared.iter().filter(|&&s| s).count();
    let mut bindings = Bindings { shared, ..Default::default() };
    let bodies = bodies(&mut bindings)?;
    let last_phase = stages.iter().map(|&(_, p)| p).max().unwrap_or(0);
    let mut main = String::new();
    for phase in 0..=last_phase {
        let (mut total, mut branches) = (0u64, String::new());
        for ((stage, _), body) in stages.iter().zip(&bodies).filter(|((_, p), _)| *p == phase) {
            let end = total + stage.n();
            let switch = if mixed { format!("\n{UNDEFINE}{}", section(stage).defines()) } else { String::new() };
            let _ = write!(
                branches,
                "{}if (g < {end}u) {{{switch}\n    uint i = g - {total}u;\n{body}    }}",
                if total == 0 { "" } else { " else " }
            );
            total = end;
        }
        let _ = write!(
            main,
            "  for (uint g = gl_LocalInvocationIndex; g < {total}u; g += gl_WorkGroupSize.x) {{\n    {branches}\n  }}\n  \
             groupMemoryBarrier();\n  barrier();\n"
        );
    }
    let mut source = String::from("#version 450\n");
    source.push_str(if mixed { sections[0].defines() } else { defines(stages.iter().flat_map(|(s, _)| &s.members)) });
    source.push_str(INCLUDES);
    for c in sections.iter().skip(1) {
        // The ops again, for this section's W (binary_ops.glsl defines IS_NAN for its type).
        source.push_str(RESULT_FN);
        source.push_str(UNDEFINE);
        source.push_str(c.defines());
        source.push_str("#undef IS_NAN\n#include \"unary_ops.glsl\"\n#include \"binary_ops.glsl\"\n#include \"compare_ops.glsl\"\n");
    }
    let _ = writeln!(source, "layout(local_size_x = {}) in;", merge_workgroup()?);
    bindings.declare(&mut source, 0, true);
    source.push_str(RESULT_FN);
    // A state copy's words of a T result (Kind::StateCopy).
    source.push_str("uint word_bits(float v) { return floatBitsToUint(v); }\nuint word_bits(int v) { return uint(v); }\nuint word_bits(uint v) { return v; }\n");
    if mixed {
        let math = if sections[0] == Compute::F64 { "  load_math_tables();\n" } else { "" };
        let _ = write!(source, "void main() {{\n{math}");
    } else {
        source.push_str("void main() {\n#ifdef MATH64\n  load_math_tables();\n#endif\n");
    }
    source.push_str(&main);
    source.push_str("}\n");
    let pipeline = kernel("merged_stages", &source, 0)?;
    let (bindings, writes) = bindings.buffers();
    let command = Command::Dispatch(Dispatch::new("merged_stages", pipeline, bindings, [0; PUSH_WORDS], [1, 1, 1], writes));
    Ok((command, copies))
}

/// The compute types of a merged kernel's sections: the float one first (its members', or f32
/// where only stages that compute nothing type-dependent but read T need one), then s32 and u32
/// where members compute in them. One section: the kernel is built as a single-type one.
fn sections(stages: &[(&Stage, usize)]) -> SmallVec<[Compute; 3]> {
    let computes: SmallVec<[Option<Compute>; 8]> = stages.iter().map(|(s, _)| s.compute()).collect();
    let typed_none = stages.iter().any(|(s, _)| s.compute().is_none() && !s.neutral());
    let float = computes.iter().flatten().copied().find(|c| !c.integer()).or(typed_none.then_some(Compute::F32));
    let mut out: SmallVec<[Compute; 3]> = float.into_iter().collect();
    for c in [Compute::S32, Compute::U32] {
        if computes.contains(&Some(c)) {
            out.push(c);
        }
    }
    if out.is_empty() {
        out.push(Compute::F32);
    }
    out
}

/// Undefines what `Compute::defines` defines, before a merged kernel's next section.
const UNDEFINE: &str =
    "#undef T\n#undef W\n#undef PRECISE\n#undef MATH64\n#undef IS_INT\n#undef IS_SIGNED\n#undef BITS\n#undef T_MIN\n#undef T_MAX\n";

/// The dependency level (as capture.rs's, over the unfused commands) at which each buffer is
/// written; the program's inputs are at 0.
fn written_levels(commands: &[Command]) -> HashMap<u64, usize> {
    let mut written_at: HashMap<u64, usize> = HashMap::new();
    for command in commands {
        let (reads, writes) = command.accesses();
        let ready = reads.iter().filter_map(|r| written_at.get(r)).copied().max().unwrap_or(0);
        for w in writes {
            written_at.insert(w, ready + 1);
        }
    }
    written_at
}

/// The most commands a run passes over to reach a later member.
const MAX_SKIP: usize = 16;

/// The members (command indices, in order) of the run that starts at `start`: later element-wise
/// commands over the same element count that read an earlier member's result at their own index
/// (or, siblings, read none and wait for nothing more), while the run reads at most MAX_INPUTS
/// buffers and writes at most MAX_OUTPUTS. Commands already fused into a kernel placed before
/// `start` run before it and are passed freely; those of a kernel placed after it (a GEMM's,
/// fused first) are passed as any other command.
fn run(
    commands: &[Command],
    parsed: &[Option<Elementwise>],
    levels: &HashMap<u64, usize>,
    placed: &[Option<usize>],
    start: usize,
    readers: &HashMap<u64, usize>,
    escapes: &HashSet<u64>,
) -> Vec<usize> {
    let Some(first) = parsed[start].as_ref().filter(|e| !e.alone()) else { return vec![start] };
    let mut run = vec![start];
    // Reads of each member's result by later members of the run.
    let mut inner_reads: HashMap<u64, usize> = HashMap::new();
    let mut members: Vec<u64> = vec![handle(&first.out)];
    let mut externals: HashSet<u64> = first.operands.iter().map(|(b, _)| handle(b)).collect();
    // The level by which everything the run reads from outside it is written.
    let level =
        |buffers: &mut dyn Iterator<Item = u64>| buffers.filter_map(|h| levels.get(&h)).copied().max().unwrap_or(0);
    let mut ready = level(&mut externals.iter().copied());
    // The element count of the index space members work in, and where the run's reduction is:
    // members before it (a prologue) work on the reduction's input elements, the reduction and
    // those after it (an epilogue) on its outputs.
    let mut space = first.n;
    let mut reduce_at = (first.kind == Kind::Reduce).then_some(0);
    // The type the run's arithmetic computes in, once a member says.
    let mut compute = first.compute;
    // What the commands passed over read and write.
    let (mut passed_reads, mut passed_writes) = (HashSet::new(), HashSet::new());
    let mut passed = 0;
    let mut k = start + 1;
    while k < parsed.len() && run.len() < MAX_OPS && passed <= MAX_SKIP {
        if placed[k].is_some_and(|at| at < start) {
            k += 1;
            continue;
        }
        let (reads, writes) = commands[k].accesses();
        let joined = parsed[k].as_ref().filter(|_| placed[k].is_none()).and_then(|next| {
            let reduces = next.kind == Kind::Reduce;
            // A GEMM only starts a run, and a GEMM's run takes no reduction.
            if next.kind == Kind::Gemm || next.alone() || (reduces && first.kind == Kind::Gemm) {
                return None;
            }
            // A reduction joins a prologue that computes its input: one whose element count is
            // the input's and whose results (written where other commands read them) the
            // reduction's layout visits once each, so each invocation writes the elements it
            // folds and no two write the same one.
            // CPU devices only: on the H200 (1dc5d75, one call) running prologues inside serial
            // reductions' loops took the MNIST step's fused kernels from 64.5 to 115 GPU us (one
            // invocation per output evaluates its input elements in turn, where element-wise
            // kernels spread them over the GPU), and one prologue case there differed from the
            // unfused kernels (not yet pinned down). Measured again at 4339bda (one call, GEMM
            // epilogues on): 17 dispatches instead of 22 but 75.9 against 66.6 GPU us per step,
            // and compiler_test's prologue case still differs on the H200 (its {12, 40, 5}
            // result), while it passes on lavapipe in the GPU class. Again at 1c4d9a3
            // (NXV_REDUCE_PROLOGUES=1, with every op and the fold's combine `precise`, so not a
            // contraction): 16 dispatches against 21, 76.4 against 66.8 GPU us, the same case
            // differs: only in NaN bits (the eager reduction's 0x7FFFFFFF, the fused 0x7FC00000),
            // which reductions now store canonically (reduce_ops.glsl's REDUCED).
            let takes_prologue = reduces
                && PROLOGUES.unwrap_or_else(crate::policy::cpu_device)
                && reduce_at.is_none()
                && next.push[0] as u64 * next.push[1] as u64 == space
                && visits_once(&next.push, space);
            if (reduces && !takes_prologue) || (!reduces && next.n != space) {
                return None;
            }
            if !next.neutral() && !compatible(compute, next.compute) {
                return None;
            }
            let independent = reads.iter().all(|r| !passed_writes.contains(r))
                && writes.iter().all(|w| !passed_writes.contains(w) && !passed_reads.contains(w));
            let mut chained = false;
            let mut new_externals = externals.clone();
            let mut new_inner = inner_reads.clone();
            for (b, access) in &next.operands {
                let h = handle(b);
                if let Some(at) = members.iter().position(|m| *m == h) {
                    let source = parsed[run[at]].as_ref()?;
                    // A prologue's values are the reduction's input elements, not its outputs.
                    let other_space = reduce_at.is_some_and(|r| at < r);
                    let readable = *access == Access::Linear || (reduces && *access == Access::Reduced);
                    if other_space || !readable || !register_fits(next, source) {
                        return None;
                    }
                    chained = true;
                    *new_inner.entry(h).or_default() += 1;
                } else {
                    new_externals.insert(h);
                }
            }
            let mut new_members = members.clone();
            new_members.push(handle(&next.out));
            // A member that waits for a later level than the run so far delays the kernel, and
            // with it whatever else reads the run's results: it joins only when nothing does.
            let new_ready = level(&mut new_externals.iter().copied());
            let delays = new_ready > ready
                && members.iter().any(|h| {
                    escapes.contains(h) || readers.get(h).copied().unwrap_or(0) > new_inner.get(h).copied().unwrap_or(0)
                });
            // One that reads no member joins only where it waits for nothing the run does not
            // (siblings: two casts that one op then combines).
            (independent
                && (chained || (new_ready <= ready && !reduces))
                && !delays
                && new_externals.len() <= MAX_INPUTS
                && outputs(&new_members, &new_inner, readers, escapes).len() <= MAX_OUTPUTS)
                .then_some((new_externals, new_inner, new_members, new_ready, compute.or(next.compute)))
        });
        match joined {
            Some(state) => {
                (externals, inner_reads, members, ready, compute) = state;
                if parsed[k].as_ref().is_some_and(|e| e.kind == Kind::Reduce) {
                    reduce_at = Some(run.len());
                    space = parsed[k].as_ref().map_or(space, |e| e.n);
                }
                run.push(k);
            }
            None => {
                passed += 1;
                passed_reads.extend(reads);
                passed_writes.extend(writes);
            }
        }
        k += 1;
    }
    run
}

/// Whether a reduction's layout (reduce_serial.comp's push constants: output and reduced dims with
/// their strides, a base offset) visits each of `n` contiguous elements exactly once: its axes,
/// sorted by stride, are a row-major layout of `n` elements from offset 0.
fn visits_once(push: &[u32; PUSH_WORDS], n: u64) -> bool {
    let (kept, reduced) = (push[2] as usize, push[3] as usize);
    if kept > 6 || reduced > 6 || push[4] != 0 {
        return false;
    }
    let axis = |dims_at: usize, strides_at: usize| {
        move |d: usize| (push[strides_at + d] as i32 as i64, push[dims_at + d] as u64)
    };
    let mut axes: SmallVec<[(i64, u64); 12]> =
        (0..kept).map(axis(5, 11)).chain((0..reduced).map(axis(17, 23))).filter(|&(_, dim)| dim != 1).collect();
    axes.sort_unstable();
    let mut expected = 1i64;
    for (stride, dim) in axes {
        if stride != expected {
            return false;
        }
        expected = expected.saturating_mul(dim as i64);
    }
    expected == n as i64
}

/// Whether `next` can take `source`'s result from its register: a convert of an 8-bit integer
/// reads a comparison's predicate, one of a 32-bit integer (and an integer sum) a select's bits
/// or a 32-bit integer result; every other op reads f32 values, which no comparison and no
/// integer result holds.
fn register_fits(next: &Elementwise, source: &Elementwise) -> bool {
    let bits = source.integer || matches!(source.kind, Kind::Select | Kind::Copy);
    match next.kind {
        Kind::Convert => match convert_input(next.op) {
            Some("uint8_t") => source.kind == Kind::Compare,
            Some("int" | "uint") => bits,
            _ => false,
        },
        Kind::Reduce if next.integer => bits,
        // An integer kernel's value (T is the integer type both compute in).
        Kind::Narrow => source.kind == Kind::Binary && source.compute == next.compute,
        _ => {
            !source.integer
                && source.kind != Kind::Narrow
                && (source.kind != Kind::Compare || next.kind == Kind::Select)
        }
    }
}

/// The members (by their results' handles, in run order) whose results the kernel must write:
/// those read outside the run or by the program's caller, and the last.
fn outputs(
    members: &[u64],
    inner_reads: &HashMap<u64, usize>,
    readers: &HashMap<u64, usize>,
    escapes: &HashSet<u64>,
) -> Vec<usize> {
    (0..members.len())
        .filter(|&k| {
            let h = &members[k];
            k + 1 == members.len()
                || escapes.contains(h)
                || readers.get(h).copied().unwrap_or(0) > inner_reads.get(h).copied().unwrap_or(0)
        })
        .collect()
}

/// The buffers a generated kernel binds: those it only reads (`in{k}`), then those it writes
/// (`o{j}`, its last bindings, as queue.rs's `accesses` reads a dispatch), each once with the
/// GLSL type of its elements. A merged kernel's later stages read what earlier ones wrote
/// through the written binding.
#[derive(Default)]
struct Bindings {
    reads: Vec<(Subbuffer<[u8]>, &'static str)>,
    writes: Vec<(Subbuffer<[u8]>, &'static str)>,
    /// Merged kernels: the index space of the stage being written (`stage_n`), then per write
    /// the elements its stage writes at index i (0: not a candidate for a shared copy), whether
    /// a later stage reads it, and whether it has a shared-memory copy (`s{j}`, which later
    /// stages read instead of the buffer: a load from L1 instead of L2 in each phase's chain).
    stage_n: u64,
    /// In a merged kernel of several sections, the GLSL type T stands for in the stage being
    /// written: bindings then take concrete types (empty: T itself).
    t: &'static str,
    write_n: Vec<u64>,
    read_back: Vec<bool>,
    shared: Vec<bool>,
}

impl Bindings {
    /// The GLSL name of `buffer` read as `ty`.
    fn read(&mut self, buffer: &Subbuffer<[u8]>, ty: &'static str) -> Result<String> {
        let ty = self.concrete(ty);
        let h = handle(buffer);
        if let Some(j) = self.writes.iter().position(|(b, _)| handle(b) == h) {
            // A written buffer has one binding (so that the barrier between a merged kernel's
            // stages covers its every access), so one type.
            self.read_back[j] = true;
            let name = if self.shared.get(j).copied().unwrap_or(false) { 's' } else { 'o' };
            return match self.writes[j].1 == ty {
                true => Ok(format!("{name}{j}")),
                false => Err(Error::Vulkan(format!("a kernel reads its {} result as {ty}", self.writes[j].1))),
            };
        }
        if let Some(k) = self.reads.iter().position(|(b, t)| handle(b) == h && *t == ty) {
            return Ok(format!("in{k}"));
        }
        self.reads.push((buffer.clone(), ty));
        Ok(format!("in{}", self.reads.len() - 1))
    }

    fn concrete(&self, ty: &'static str) -> &'static str {
        if ty == "T" && !self.t.is_empty() {
            self.t
        } else {
            ty
        }
    }

    /// `buffer`'s element `at` as `ty`: through the binding that reads it, or the one a stage of
    /// the same kernel writes it through, its bits reinterpreted where that stage's type is
    /// another 4-byte one (a merged kernel of several sections: an integer convert's or sum's
    /// uint read by s32 ops, s32 values a select or a copy holds as a float's bits).
    fn element(&mut self, buffer: &Subbuffer<[u8]>, ty: &'static str, at: &str) -> Result<String> {
        let ty = self.concrete(ty);
        let four = |t: &str| matches!(t, "int" | "uint" | "float");
        if let Some(&(_, written)) = self.writes.iter().find(|(b, _)| handle(b) == handle(buffer)) {
            if written != ty && four(written) && four(ty) {
                let x = format!("{}[{at}]", self.read(buffer, written)?);
                return Ok(match (written, ty) {
                    ("float", "uint") => format!("floatBitsToUint({x})"),
                    ("float", "int") => format!("floatBitsToInt({x})"),
                    ("uint", "float") => format!("uintBitsToFloat({x})"),
                    ("int", "float") => format!("intBitsToFloat({x})"),
                    (_, t) => format!("{t}({x})"),
                });
            }
        }
        Ok(format!("{}[{at}]", self.read(buffer, ty)?))
    }

    /// A uint from `buffer` at `index`: its word there, or where a stage of the same kernel
    /// writes it (an integer start computed in a merged kernel), its element there widened (the
    /// low bytes the same, as dynamic_start.glsl reads them).
    fn read_uint(&mut self, buffer: &Subbuffer<[u8]>, index: &str) -> Result<String> {
        match self.writes.iter().find(|(b, _)| handle(b) == handle(buffer)) {
            Some(&(_, ty)) => {
                let name = self.read(buffer, ty)?;
                Ok(match ty {
                    "uint" => format!("{name}[{index}]"),
                    "T" | "float" => format!("word_bits({name}[{index}])"),
                    _ => format!("uint({name}[{index}])"),
                })
            }
            None => Ok(format!("{}[{index}]", self.read(buffer, "uint")?)),
        }
    }

    /// The GLSL name of `buffer` read as 4-byte words, and their type: the written binding's
    /// where the kernel writes it, else a uint binding.
    fn read_words(&mut self, buffer: &Subbuffer<[u8]>) -> Result<(String, &'static str)> {
        match self.writes.iter().find(|(b, _)| handle(b) == handle(buffer)) {
            Some(&(_, ty)) => Ok((self.read(buffer, ty)?, ty)),
            None => Ok((self.read(buffer, "uint")?, "uint")),
        }
    }

    /// The binding number among the writes of `buffer` written as `ty` (`at_i`: at the stage's
    /// index i, so a merged kernel may keep a shared copy of it; bytes cannot be shared).
    ///
    /// A buffer read before takes a binding of its own only for a device loop's state update
    /// (`after_reads`): a merged kernel's phases put it after every read of the state (it depends
    /// on them), so the two bindings of one buffer are never used across a barrier's two sides
    /// the wrong way round.
    fn write(&mut self, buffer: &Subbuffer<[u8]>, ty: &'static str, at_i: bool, after_reads: bool) -> Result<usize> {
        let ty = self.concrete(ty);
        let h = handle(buffer);
        if !after_reads && self.reads.iter().any(|(b, _)| handle(b) == h) {
            return Err(Error::Vulkan("a kernel writes a buffer it read before".into()));
        }
        // A merged kernel's second writer of a buffer (a put_slice into the copy of its target
        // an earlier stage made) takes the same binding; neither keeps a shared copy.
        if let Some(j) = self.writes.iter().position(|(b, _)| handle(b) == h) {
            if self.writes[j].1 != ty {
                return Err(Error::Vulkan(format!("a kernel writes its {} result as {ty}", self.writes[j].1)));
            }
            self.write_n[j] = 0;
            return Ok(j);
        }
        self.writes.push((buffer.clone(), ty));
        // Shared copies hold 4-byte elements only.
        let narrow = ty.ends_with("8_t") || ty.ends_with("16_t");
        self.write_n.push(if at_i && !narrow { self.stage_n } else { 0 });
        self.read_back.push(false);
        Ok(self.writes.len() - 1)
    }

    /// The statement storing `value` into write `j` at `at` (and into its shared copy).
    fn store(&self, j: usize, at: &str, value: &str) -> String {
        match self.shared.get(j).copied().unwrap_or(false) {
            true => format!("o{j}[{at}] = s{j}[{at}] = {value};"),
            false => format!("o{j}[{at}] = {value};"),
        }
    }

    /// Which writes get a shared copy: those later stages read, while their copies fit `budget`
    /// bytes (4-byte elements), of those the kernel writes whole (`whole`: no other command of
    /// the program writes them, so index i < n is all there is to read).
    fn share(&mut self, budget: u64, whole: impl Fn(u64) -> bool) {
        let mut used = 0;
        self.shared = (0..self.writes.len())
            .map(|j| {
                let bytes = self.write_n[j] * 4;
                let take = self.read_back[j] && bytes > 0 && used + bytes <= budget && whole(handle(&self.writes[j].0));
                used += if take { bytes } else { 0 };
                take
            })
            .collect();
    }

    /// The declarations, from binding `first`. Reads are read-only; writes write-only, or
    /// `coherent` where a merged kernel's later stages read them (after a barrier).
    fn declare(&self, source: &mut String, first: usize, coherent: bool) {
        for (k, (_, t)) in self.reads.iter().enumerate() {
            let _ = writeln!(source, "layout(set = 0, binding = {}) readonly buffer I{k} {{ {t} in{k}[]; }};", first + k);
        }
        let access = if coherent { "coherent" } else { "writeonly" };
        for (j, (_, t)) in self.writes.iter().enumerate() {
            let binding = first + self.reads.len() + j;
            let _ = writeln!(source, "layout(set = 0, binding = {binding}) {access} buffer O{j} {{ {t} o{j}[]; }};");
            if self.shared.get(j).copied().unwrap_or(false) {
                let _ = writeln!(source, "shared {t} s{j}[{}];", self.write_n[j]);
            }
        }
    }

    fn buffers(self) -> (SmallVec<[Subbuffer<[u8]>; 4]>, usize) {
        let writes = self.writes.len();
        (self.reads.into_iter().chain(self.writes).map(|(b, _)| b).collect(), writes)
    }
}

/// A generated element-wise kernel's run, kept for `merge`: its members and those whose results
/// it writes (by position in the run).
#[derive(Clone)]
pub struct Stage {
    members: Vec<Elementwise>,
    written: Vec<usize>,
}

impl Stage {
    /// Its index space: the element count, or a reduction's output count.
    fn n(&self) -> u64 {
        self.members.last().map_or(0, |e| e.n)
    }

    fn compute(&self) -> Option<Compute> {
        self.members.iter().find_map(|e| e.compute)
    }

    /// A device loop's state copy: words as uint, whatever T is, so it joins kernels of any type.
    fn neutral(&self) -> bool {
        self.members.iter().all(|e| e.kind == Kind::StateCopy)
    }

    /// Small enough that one workgroup runs it in about the time a dispatch costs.
    fn small(&self) -> bool {
        let folds = self.members.iter().filter(|e| e.kind == Kind::Reduce).map(|e| e.n * e.push[1] as u64).max();
        (1..=MERGE_ELEMENTS).contains(&self.n()) && folds.unwrap_or(0) <= MERGE_FOLDS
    }

    /// The GLSL that computes the run at index `i`, reading and writing through `bindings`.
    fn body(&self, bindings: &mut Bindings) -> Result<String> {
        let run: Vec<&Elementwise> = self.members.iter().collect();
        run_body(&run, &self.written, bindings)
    }
}

/// Whether programs' small commands are merged (neither NXV_MERGE=0 nor NXV_FUSE=0).
pub fn merging() -> bool {
    !*MERGE_OFF && !*FUSE_OFF
}

/// Whether every command of a fused program is a stage `merge` could take (and small enough):
/// such a program's stages are kept for device loops (capture.rs, loops.rs).
pub fn all_small_stages(list: &[(Command, Option<Stage>)]) -> bool {
    list.iter().all(|(_, stage)| stage.as_ref().is_some_and(Stage::small))
}

/// A device loop's copy of `src` into `dst` (the whole `bytes`, 4-byte words), where given only
/// while the u32 at `flag` is not zero, as a stage (Kind::StateCopy); None where the bytes are
/// not words.
pub fn state_copy(flag: Option<&Subbuffer<[u8]>>, src: &Subbuffer<[u8]>, dst: &Subbuffer<[u8]>, bytes: u64) -> Option<Stage> {
    (bytes % 4 == 0 && bytes > 0).then(|| Stage {
        members: vec![Elementwise {
            kind: Kind::StateCopy,
            op: 0,
            n: bytes / 4,
            operands: flag.into_iter().chain([src]).map(|b| (b.clone(), Access::Linear)).collect(),
            out: dst.clone(),
            push: [0; PUSH_WORDS],
            // Words held as a uint (`stored`), in a kernel of any type (`Stage::neutral`).
            integer: true,
            compute: None,
            gemm: None,
            starts: SmallVec::new(),
            out_access: Access::Linear,
        }],
        written: vec![0],
    })
}

/// One dispatch of the generated kernel for `run`, and the run as a `Stage` (not for a GEMM's).
fn fused_command(
    run: &[&Elementwise],
    readers: &HashMap<u64, usize>,
    escapes: &HashSet<u64>,
) -> Result<(Command, Option<Stage>)> {
    let last = run.last().expect("a run is not empty");
    let members: Vec<u64> = run.iter().map(|e| handle(&e.out)).collect();
    let mut inner_reads: HashMap<u64, usize> = HashMap::new();
    for (b, _) in run.iter().flat_map(|e| &e.operands) {
        if members.contains(&handle(b)) {
            *inner_reads.entry(handle(b)).or_default() += 1;
        }
    }
    let written = outputs(&members, &inner_reads, readers, escapes);
    let defines = defines(run.iter().copied());
    let mut bindings = Bindings::default();
    let body = run_body(run, &written, &mut bindings)?;
    if let Some((gemm, groups)) = &run[0].gemm {
        return Ok((gemm_command(run, gemm, *groups, defines, bindings, &body)?, None));
    }
    let mut source = String::from("#version 450\n");
    source.push_str(defines);
    source.push_str(INCLUDES);
    source.push_str("layout(local_size_x_id = 3) in;\nlayout(constant_id = 2) const uint PER = 1;\n");
    bindings.declare(&mut source, 0, false);
    source.push_str(RESULT_FN);
    source.push_str("void main() {\n#ifdef MATH64\n  load_math_tables();\n#endif\n");
    source.push_str("  FOR_EACH_ELEMENT(i, pc[0]) {\n");
    source.push_str(&body);
    source.push_str("  }\n}\n");
    let pipeline = kernel("fused_elementwise", &source, 0)?;
    let per = pipeline.per_invocation as u64;
    let (bindings, writes) = bindings.buffers();
    let mut push = [0; PUSH_WORDS];
    push[0] = last.n as u32;
    let groups = crate::ops::elementwise_groups(last.n.div_ceil(per));
    let command = Command::Dispatch(Dispatch::new("fused_elementwise", pipeline, bindings, push, groups, writes));
    Ok((command, Some(Stage { members: run.iter().map(|&e| e.clone()).collect(), written })))
}

/// The defines of the type members' arithmetic computes in (members that compute nothing
/// type-dependent alone need no f64: a device may lack it).
fn defines<'e>(members: impl IntoIterator<Item = &'e Elementwise>) -> &'static str {
    members.into_iter().find_map(|e| e.compute).unwrap_or(Compute::F32).defines()
}

/// The GLSL statements of `run` at result index `i`, writing the members in `written`.
fn run_body(run: &[&Elementwise], written: &[usize], bindings: &mut Bindings) -> Result<String> {
    let mut results: HashMap<u64, usize> = HashMap::new();
    // Each written member's output binding (among the writes).
    let mut outputs: HashMap<usize, usize> = HashMap::new();
    // A reduction's prologue evaluates at the input element `j` it folds, inside its loop; the
    // reduction and its epilogue at the output element `i`.
    let reduce_at = run.iter().position(|e| e.kind == Kind::Reduce);
    let in_prologue = |k: usize| reduce_at.is_some_and(|r| k < r);
    let (mut prologue, mut body) = (String::new(), String::new());
    for (k, e) in run.iter().enumerate() {
        let at_index = if in_prologue(k) { "j" } else { "i" };
        if e.kind == Kind::CopyStarts {
            // The starts' clamped offset, as copy.comp's STARTS variant adds it (an 8-byte
            // start's high word read only for those).
            let mut terms = vec!["0".to_string()];
            for start in &e.starts {
                let low = bindings.read_uint(&start.buffer, "0")?;
                let high = if start.code & 3 == 3 { bindings.read_uint(&start.buffer, "1")? } else { "0u".into() };
                terms.push(format!(
                    "int(clamped_start(uvec2({low}, {high}), {}u, {}u)) * ({})",
                    start.code, start.max, start.stride
                ));
            }
            let _ = writeln!(body, "    int off{k} = {};", terms.join(" + "));
        }
        if e.kind == Kind::StateCopy {
            // The flag's word (a gated copy's), and the source's words: as uint, or through the
            // binding (and type) a stage of the same kernel wrote it with.
            let (gate, src) = match &e.operands[..] {
                [(flag, _), (src, _)] => (format!("{} != 0u", bindings.read_uint(flag, "0")?), src),
                [(src, _)] => ("true".to_string(), src),
                _ => return Err(Error::Vulkan("a state copy of no source".into())),
            };
            let (source, ty) = bindings.read_words(src)?;
            let value = match ty {
                "uint" => format!("{source}[i]"),
                "T" | "float" | "int" => format!("word_bits({source}[i])"),
                _ => return Err(Error::Vulkan(format!("a state copy of words from a {ty} result"))),
            };
            let _ = writeln!(body, "    bool g{k} = {gate};\n    uint t{k} = {value};");
            results.insert(handle(&e.out), k);
            if written.contains(&k) {
                outputs.insert(k, bindings.write(&e.out, "uint", true, true)?);
            }
            continue;
        }
        let mut args: SmallVec<[String; 3]> = SmallVec::new();
        // A GEMM's operands are its own code's to read.
        let operands = if e.kind == Kind::Gemm { &e.operands[..0] } else { &e.operands[..] };
        for (at, (b, access)) in operands.iter().enumerate() {
            let h = handle(b);
            if let Some(&j) = results.get(&h) {
                // An integer operand in a register: a predicate, an integer result (a uint), or a
                // select's 4-byte bits.
                let integer = run[j].integer;
                let int_input = e.kind == Kind::Convert || (e.kind == Kind::Reduce && e.integer);
                args.push(match (int_input, convert_input(e.op)) {
                    (true, Some("uint8_t")) if e.kind == Kind::Convert => format!("(t{j} ? 1 : 0)"),
                    (true, Some("int")) if e.kind == Kind::Convert && integer => format!("int(t{j})"),
                    (true, Some("int")) if e.kind == Kind::Convert => format!("floatBitsToInt(t{j})"),
                    (true, _) if integer => format!("t{j}"),
                    (true, _) => format!("floatBitsToUint(t{j})"),
                    _ => format!("t{j}"),
                });
                continue;
            }
            let predicate = e.kind == Kind::Select && at == 0;
            let ty = match e.kind {
                _ if predicate => "uint8_t",
                Kind::Convert => convert_input(e.op).expect("parse admits these converts only"),
                // The integer kernel's own type (the input's).
                Kind::Narrow => "T",
                Kind::Reduce if e.integer => "uint",
                _ => "T",
            };
            // A reduction reads its input element j (its loop's index).
            let mut at = index(access, if e.kind == Kind::Reduce { "j" } else { at_index });
            // A slice's input element is past its starts' offset.
            if e.kind == Kind::CopyStarts && e.op == 0 {
                at = format!("uint(int({at}) + off{k})");
            }
            let read = bindings.element(b, ty, &at)?;
            args.push(if predicate { format!("({read} != uint8_t(0))") } else { read });
        }
        let line = match e.kind {
            Kind::Unary => format!("T t{k} = result(unary_apply({}u, W({})));", e.op, args[0]),
            Kind::Binary => format!("T t{k} = result(binary_apply({}u, W({}), W({})));", e.op, args[0], args[1]),
            Kind::Compare => format!("bool t{k} = compare_apply({}u, W({}), W({}));", e.op, args[0], args[1]),
            Kind::Select => format!("T t{k} = {} ? {} : {};", args[0], args[1], args[2]),
            // As convert.comp: the integer widened to 64 bits, then one conversion to f32 (or its
            // low 32 bits).
            Kind::Convert if e.integer => format!("uint t{k} = uint(int64_t({}));", args[0]),
            Kind::Convert => format!("T t{k} = float(int64_t({}));", args[0]),
            Kind::Copy | Kind::CopyStarts | Kind::Transfer => format!("T t{k} = {};", args[0]),
            Kind::StateCopy => return Err(Error::Vulkan("a state copy in a fused run".into())),
            // The low bits, as convert.comp's integer narrowing keeps them.
            Kind::Narrow => format!("{0} t{k} = {0}({1});", e.stored(), args[0]),
            // The GEMM's result as it would store it: the epilogue's argument, rounded to T.
            Kind::Gemm => format!("T t{k} = v;"),
            Kind::Reduce => reduce_fold(e, k, &args[0], &prologue),
        };
        let (target, indent) = if in_prologue(k) { (&mut prologue, "      ") } else { (&mut body, "    ") };
        let _ = writeln!(target, "{indent}{line}");
        results.insert(handle(&e.out), k);
        if written.contains(&k) {
            let at_i = !in_prologue(k) && e.stored_at(k) == "i";
            let j = bindings.write(&e.out, e.stored(), at_i, false)?;
            // The prologue's results that are read elsewhere are written as they are computed.
            if in_prologue(k) {
                let _ = writeln!(prologue, "      {}", bindings.store(j, "j", &store(e, k)));
            }
            outputs.insert(k, j);
        }
    }
    for &k in written.iter().filter(|&&k| !in_prologue(k)) {
        let stored = bindings.store(outputs[&k], &run[k].stored_at(k), &store(run[k], k));
        match run[k].kind {
            Kind::StateCopy => _ = writeln!(body, "    if (g{k}) {stored}"),
            _ => _ = writeln!(body, "    {stored}"),
        }
    }
    Ok(body)
}

/// A serial reduction as reduce_serial.comp computes it, its layout (push constants) written in:
/// output `i`'s reduced elements folded in order, each computed by the `prologue` first
/// (`input`: the element's value, at index j). An integer sum adds in 32 bits, wrapping as
/// reduce_serial_s32/u32 do.
fn reduce_fold(e: &Elementwise, k: usize, input: &str, prologue: &str) -> String {
    let (acc, start, fold, result) = if e.integer {
        ("uint", "0u".to_string(), format!("a{k} + {input}"), format!("uint t{k} = a{k};"))
    } else {
        (
            "ACC",
            format!("identity_of({}u)", e.op),
            format!("combine_of({}u, a{k}, ACC({input}))", e.op),
            format!("T t{k} = REDUCED(a{k});"),
        )
    };
    let pc = &e.push;
    let layout = |rank_at: usize, dims_at: usize, strides_at: usize, base: i64, at: &str| {
        let rank = (pc[rank_at] as usize).min(6);
        let dims: SmallVec<[u64; 6]> = pc[dims_at..dims_at + rank].iter().map(|&v| v as u64).collect();
        let strides: SmallVec<[i64; 6]> = pc[strides_at..strides_at + rank].iter().map(|&v| v as i32 as i64).collect();
        index(&Access::Strided { offset: base, dims, strides }, at)
    };
    let (count, reduced) = (pc[1], pc[3]);
    // Element r of the fold: its index j, the prologue at j, the fold.
    let step = |j: &str| format!("{{\n      uint j = {j};\n{prologue}      a{k} = {fold};\n    }}");
    let base = layout(2, 5, 11, pc[4] as i32 as i64, "i");
    let loop_ = if reduced == 1 {
        // One reduced dim (the common case): the elements lie a stride apart, four a step, each
        // in its own scope, so their loads can go out before they fold (the same folds in the
        // same order as the loop: the same sums, bit for bit).
        let stride = pc[23] as i32;
        let at = |r: &str| format!("uint(int(base{k}) + int({r}) * ({stride}))");
        let unrolled: String = ["r", "r + 1u", "r + 2u", "r + 3u"].iter().map(|r| step(&at(r))).collect();
        format!(
            "uint r = 0u;\n    for (; r + 4u <= {count}u; r += 4u) {{\n    {unrolled}\n    }}\n    \
             for (; r < {count}u; ++r) {}",
            step(&at("r"))
        )
    } else {
        let at = format!("uint(int(base{k}) + int({}))", layout(3, 17, 23, 0, "r"));
        format!("for (uint r = 0u; r < {count}u; ++r) {}", step(&at))
    };
    format!("{acc} a{k} = {start};\n    uint base{k} = {base};\n    {{\n    {loop_}\n    }}\n    {result}")
}

/// The headers every generated kernel includes (after its defines). reduce_ops.glsl's identity_of
/// and combine_of take the op; its OP-bound wrappers want an OP, unused here.
const INCLUDES: &str = "#include \"common.glsl\"\n#ifdef MATH64\n#include \"math64.glsl\"\n#endif\n\
                        #include \"unary_ops.glsl\"\n#include \"binary_ops.glsl\"\n#include \"compare_ops.glsl\"\n\
                        const uint OP = 0u;\n#include \"reduce_ops.glsl\"\n#include \"dynamic_start.glsl\"\n";

/// One dispatch of a GEMM with an epilogue: the GEMM's own source, built with its own defines,
/// storing each result through `epilogue(i, v)`, the run's other members at result index i
/// (`body`, which writes the results `bindings` holds). Bindings: the GEMM's operands (0 and 1),
/// then the epilogue's; push constants and workgroups the GEMM's. The epilogue is declared
/// first, under its element-wise kernels' `defines`, then those defines give way to the GEMM's:
/// each part computes exactly as its own kernel.
fn gemm_command(
    run: &[&Elementwise],
    gemm: PipelineRef,
    groups: [u32; 3],
    defines: &str,
    bindings: Bindings,
    body: &str,
) -> Result<Command> {
    let built = gemm.kernel();
    let gemm_source = built.source.strip_prefix("#version 450\n").ok_or_else(|| Error::Vulkan("a GEMM source without its version line".into()))?;
    let mut source = String::from("#version 450\n");
    source.push_str(defines);
    source.push_str(INCLUDES);
    bindings.declare(&mut source, 2, false);
    source.push_str("T result(W r) { return CANONICAL_NAN(T, r); }\n");
    source.push_str("void epilogue_init() {\n#ifdef MATH64\n  load_math_tables();\n#endif\n}\n");
    source.push_str("void epilogue(uint i, T v) {\n");
    source.push_str(body);
    source.push_str("}\n#undef W\n#undef PRECISE\n#undef MATH64\n#undef STORE_C\n");
    for (name, value) in built.defines {
        let _ = writeln!(source, "#undef {name}\n#define {name} {value}");
    }
    source.push_str("#define EPILOGUE 1\n#define STORE_C(i, v) epilogue(i, T(v))\n");
    source.push_str(gemm_source);
    let pipeline = kernel("fused_gemm", &source, gemm.op())?;
    let (epilogue, writes) = bindings.buffers();
    let bindings = run[0].operands.iter().map(|(b, _)| b.clone()).chain(epilogue).collect();
    Ok(Command::Dispatch(Dispatch::new("fused_gemm", pipeline, bindings, run[0].push, groups, writes)))
}

/// What the kernel stores for member `k`'s result: a predicate as a byte, else the value.
fn store(e: &Elementwise, k: usize) -> String {
    if e.predicate() {
        format!("uint8_t(t{k} ? 1 : 0)")
    } else {
        format!("t{k}")
    }
}

/// The element an operand is read at, for element `at` (a GLSL variable) of the op's index
/// space, as GLSL.
fn index(access: &Access, at: &str) -> String {
    match access {
        Access::Linear | Access::Reduced | Access::Gemm => at.into(),
        Access::Strided { offset, dims, strides } => {
            // Row-major digits of i over dims, last dim first (as binary.comp decodes them).
            let mut terms = vec![offset.to_string()];
            let mut divisor = 1u64;
            for (&dim, &stride) in dims.iter().zip(strides).rev() {
                if stride != 0 && dim != 1 {
                    terms.push(format!("int(({at} / {divisor}u) % {dim}u) * ({stride})"));
                }
                divisor *= dim;
            }
            format!("uint({})", terms.join(" + "))
        }
    }
}

/// The pipeline of generated kernel `name` with specialization constant 0 set to `op`, compiled
/// once per source and device.
pub(crate) fn kernel(name: &'static str, source: &str, op: u32) -> Result<PipelineRef> {
    let key = (crate::context::current(), source.to_string(), op);
    if let Some(p) = KERNELS.get(&key) {
        return Ok(*p);
    }
    let words = spirv(source)?;
    let module = unsafe { ShaderModule::new(ctx()?.device.clone(), ShaderModuleCreateInfo::new(&words)) }
        .map_err(|e| Error::vulkan("loading a fused kernel", e))?;
    let pipeline = pipelines::runtime_pipeline(name, module, op);
    KERNELS.insert(key, pipeline);
    Ok(pipeline)
}

/// The shaders a generated kernel includes, as the build compiled them.
fn include(name: &str) -> Option<&'static str> {
    Some(match name {
        "common.glsl" => include_str!("../shaders/common.glsl"),
        "math64.glsl" => include_str!("../shaders/math64.glsl"),
        "unary_ops.glsl" => include_str!("../shaders/unary_ops.glsl"),
        "binary_ops.glsl" => include_str!("../shaders/binary_ops.glsl"),
        "compare_ops.glsl" => include_str!("../shaders/compare_ops.glsl"),
        "reduce_ops.glsl" => include_str!("../shaders/reduce_ops.glsl"),
        "dynamic_start.glsl" => include_str!("../shaders/dynamic_start.glsl"),
        _ => return None,
    })
}

/// A fingerprint of every header a generated kernel may include, as this build has them: part of
/// a cached kernel's file name, so SPIR-V compiled by a build whose headers differ (an op's
/// rounding fixed, a workgroup size changed) is never taken for the same source.
static HEADERS: Lazy<u64> = Lazy::new(|| {
    let names = [
        "common.glsl",
        "math64.glsl",
        "unary_ops.glsl",
        "binary_ops.glsl",
        "compare_ops.glsl",
        "reduce_ops.glsl",
        "dynamic_start.glsl",
    ];
    let all: String = names.iter().filter_map(|n| include(n)).collect();
    pipeline_disk_cache::hash(all.as_bytes())
});

/// Fused kernels compiled with shaderc, and read back from the disk cache, since start.
pub static COMPILED: AtomicU64 = AtomicU64::new(0);
pub static FROM_DISK: AtomicU64 = AtomicU64::new(0);

/// The SPIR-V of a generated kernel: from the pipeline cache's directory when an earlier start
/// compiled the same source with the same headers (the source kept beside it and compared, so a
/// hash collision cannot mix them up; the headers' fingerprint in the name), else compiled now
/// and written there.
fn spirv(source: &str) -> Result<Vec<u32>> {
    let files = pipeline_disk_cache::directory().map(|dir| {
        let name = format!("fused-{:016x}-{:016x}", pipeline_disk_cache::hash(source.as_bytes()), *HEADERS);
        (dir.join(format!("{name}.comp")), dir.join(format!("{name}.spv")))
    });
    if let Some((comp, spv)) = &files {
        let same = std::fs::read_to_string(comp).is_ok_and(|s| s == source);
        if let Some(words) = same.then(|| std::fs::read(spv).ok()).flatten().and_then(|b| words(&b)) {
            FROM_DISK.fetch_add(1, Ordering::Relaxed);
            return Ok(words);
        }
    }
    let words = compile(source)?;
    COMPILED.fetch_add(1, Ordering::Relaxed);
    if let Some((comp, spv)) = &files {
        // Best effort: a cache that cannot be written only means compiling again next start.
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let _ = comp.parent().map(std::fs::create_dir_all);
        let _ = std::fs::write(spv, bytes).and_then(|_| std::fs::write(comp, source));
    }
    Ok(words)
}

/// SPIR-V words from a file's bytes (whole words, the magic number first), or None.
fn words(bytes: &[u8]) -> Option<Vec<u32>> {
    if bytes.len() < 20 || bytes.len() % 4 != 0 {
        return None;
    }
    let words: Vec<u32> = bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    (words[0] == 0x0723_0203).then_some(words)
}

fn compile(source: &str) -> Result<Vec<u32>> {
    let compiler = shaderc::Compiler::new().ok_or_else(|| Error::Vulkan("shaderc is unavailable".into()))?;
    let mut options = shaderc::CompileOptions::new().ok_or_else(|| Error::Vulkan("shaderc options".into()))?;
    // As vulkano-shaders builds the crate's own kernels (shaders.rs).
    options.set_target_env(shaderc::TargetEnv::Vulkan, shaderc::EnvVersion::Vulkan1_2 as u32);
    options.set_target_spirv(shaderc::SpirvVersion::V1_3);
    options.set_include_callback(|name, _, _, _| {
        include(name)
            .map(|content| shaderc::ResolvedInclude { resolved_name: name.to_string(), content: content.to_string() })
            .ok_or_else(|| format!("no shader {name}"))
    });
    let artifact = compiler
        .compile_into_spirv(source, shaderc::ShaderKind::Compute, "fused.comp", "main", Some(&options))
        .map_err(|e| Error::Vulkan(format!("compiling a fused kernel: {e}")))?;
    Ok(artifact.as_binary().to_vec())
}
