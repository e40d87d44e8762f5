//! Device-side `while` loops in compiled programs.
//!
//! Under `Nx.Defn.Evaluator` a `while` whose condition depends on the arguments reads that
//! condition on the host every iteration: a flush and a fence wait per iteration in the caller.
//! The compiler (compiler.ex) instead captures the condition and the body as two programs over
//! one set of state buffers (the placeholders of both) and queues a `Command::Loop`: the GPU
//! thread runs the loop itself (queue.rs, `Recorder::run_loop`), the caller gets its results at
//! once like any op's.
//!
//! One iteration is the condition (a u32 flag: the predicate is not zero), the body into its own
//! output buffers, and a copy of those into the state gated by the flag (copy_multi.comp's GATED
//! variant): once the condition is false the state stops changing, so running more iterations
//! than needed computes nothing different. The GPU thread runs iterations in chunks, one
//! pre-recorded command buffer executed k times and the condition once more, then reads the flag
//! after the fence: a chunk that ends with the condition false ends the loop. Chunks double from
//! one iteration while they take under CHUNK_TARGET and halve past it, so a long loop of small
//! bodies costs a fence wait per many iterations, and a loop of heavy bodies wastes at most one
//! chunk's iterations (of at most CHUNK_TARGET) after its condition turns false.
//!
//! A body that runs device loops of its own (a `while` nested in the body) is not run ahead of
//! its condition: an inner loop started on a state the outer condition rejects might never end.
//! Such a loop reads its condition before each iteration (a fence wait), then records the body's
//! commands in order, running each inner loop as the GPU thread runs any (`nested`).
use crate::capture::ProgramRef;
use crate::error::{Error, Result};
use crate::queue::{self, Command, LoopRun};
use crate::tensor::{self, BufferRef};
use rustler::{Encoder, Env, ResourceArc, Term};
use smallvec::SmallVec;
use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use vulkano::buffer::Subbuffer;
use vulkano::command_buffer::CommandBuffer;

/// Chunk sizes: at most this many iterations between two reads of the condition.
pub const MAX_CHUNK: usize = 256;
/// A chunk that took less than this (submission to fence) is followed by one twice as long.
pub const CHUNK_TARGET: Duration = Duration::from_millis(2);

pub struct Loop {
    device: usize,
    /// The loop state, one buffer per state tensor (both programs' placeholders).
    pub state: Vec<Subbuffer<[u8]>>,
    /// Where the condition program writes its flag, and the host-visible buffer a chunk's last
    /// flag is copied to.
    pub flag: Subbuffer<[u8]>,
    pub staging: Subbuffer<[u8]>,
    /// The condition's commands, and one iteration's (condition, body, gated copies).
    check_commands: Vec<Command>,
    step_commands: Vec<Command>,
    check: OnceLock<CommandBuffer>,
    step: OnceLock<CommandBuffer>,
    /// For a body with device loops inside: its commands and the state update (ungated: they
    /// run only after the condition read true), in capture order; `step_commands` is empty.
    pub nested: Option<Vec<Command>>,
    /// Deferred checks the condition and the body make (templates, in the order made), and per
    /// check the 16 bytes that hold its first failed value during a run (`checks::accumulate`):
    /// a run copies zeros in and the values out beside the state's (`copied`), and gives its
    /// outputs checks over those values.
    pub checks: Vec<Arc<crate::checks::Check>>,
    pub accumulators: Vec<Subbuffer<[u8]>>,
    zeros: Option<BufferRef>,
    /// What the commands bind: both programs (their intermediates), the state and flag tensors,
    /// the body's results (a constant one is a tensor of its own), scratch buffers.
    _programs: [ResourceArc<ProgramRef>; 2],
    _tensors: Vec<BufferRef>,
}

impl Loop {
    /// The condition alone, recorded at the first run (by the GPU thread).
    pub fn check(&self) -> Result<&CommandBuffer> {
        secondary(&self.check, &self.check_commands)
    }

    /// One iteration, recorded at the first run (by the GPU thread).
    pub fn step(&self) -> Result<&CommandBuffer> {
        secondary(&self.step, &self.step_commands)
    }
}

impl Loop {
    /// What a run copies in from its initial tensors (and zeros) and out into its outputs: the
    /// state, then the checks' accumulators.
    pub fn copied(&self) -> impl Iterator<Item = &Subbuffer<[u8]>> {
        self.state.iter().chain(&self.accumulators)
    }

    /// One iteration's kernels in the order they run (a body with device loops inside: its
    /// commands', the condition's run alone before each) and its dependency levels.
    pub fn iteration(&self) -> (Vec<&'static str>, usize) {
        let commands = self.nested.as_deref().unwrap_or(&self.step_commands);
        let names = commands.iter().map(queue::Command::kernel_name).collect();
        let levels = queue::levels(commands).into_iter().max().map_or(0, |l| l + 1);
        (names, levels)
    }
}

fn secondary<'a>(cell: &'a OnceLock<CommandBuffer>, commands: &[Command]) -> Result<&'a CommandBuffer> {
    if let Some(cb) = cell.get() {
        return Ok(cb);
    }
    // Ends with a full barrier, so the next execution (the same iteration again) sees its writes.
    let cb = queue::record_secondary(commands, true)?;
    Ok(cell.get_or_init(|| cb))
}

pub struct LoopRef(pub Arc<Loop>);

#[rustler::resource_impl]
impl rustler::Resource for LoopRef {}

/// A loop from its condition program (placeholders `state`, one output: `flag`, a u32 scalar)
/// and its body program (placeholders `state`, outputs `next`: the next state, in order). A
/// dirty NIF: it orders both programs' commands (a long body's can take more than a millisecond).
#[rustler::nif(schedule = "DirtyCpu")]
fn loop_new<'a>(
    env: Env<'a>,
    cond: ResourceArc<ProgramRef>,
    flag: BufferRef,
    body: ResourceArc<ProgramRef>,
    next: Vec<BufferRef>,
    state: Vec<BufferRef>,
) -> Result<Term<'a>> {
    let device = cond.0.device();
    let _device = crate::context::use_device(device)?;
    // Scratch buffers are allocated here (in the process that captured the programs).
    let _capture = crate::capture::scope(env);
    if body.0.device() != device || state.iter().chain(&next).chain([&flag]).any(|b| b.device != device) {
        return Err(crate::error::arg_error!("a device loop's programs and buffers must be on one device"));
    }
    if next.len() != state.len() {
        return Err(crate::error::arg_error!(
            "a device loop's body returns {} tensors for a state of {}",
            next.len(),
            state.len()
        ));
    }
    if let Some((i, _)) = next.iter().zip(&state).enumerate().find(|(_, (n, s))| n.bytes != s.bytes) {
        return Err(crate::error::arg_error!("a device loop's body changes the size of state tensor {i}"));
    }
    let state_buffers: Vec<Subbuffer<[u8]>> = state.iter().map(|b| b.get()).collect::<Result<_>>()?;
    let flag_buffer = flag.get()?;
    let handles: HashSet<u64> = state_buffers.iter().map(queue::handle).collect();
    let mut tensors: Vec<BufferRef> = state.iter().chain(&next).cloned().collect();
    tensors.push(flag.clone());
    // The gated copies read every source while writing the state, all at once: a state tensor
    // the body returns in another slot (`{b, a + b}`) is copied aside first.
    let mut aside = Vec::new();
    let mut pairs: Vec<(Subbuffer<[u8]>, Subbuffer<[u8]>)> = Vec::new();
    for (n, dst) in next.iter().zip(&state_buffers) {
        let src = n.get()?;
        if queue::handle(&src) == queue::handle(dst) {
            continue;
        }
        let src = if handles.contains(&queue::handle(&src)) {
            let scratch = tensor::alloc(n.bytes)?;
            let buffer = scratch.get()?;
            let bytes = src.size().min(buffer.size());
            let stage = crate::fuse::state_copy(None, &src, &buffer, bytes);
            aside.push((Command::Copy { src: src.clone(), dst: buffer.clone(), bytes }, stage));
            tensors.push(scratch);
            buffer
        } else {
            src
        };
        pairs.push((src, dst.clone()));
    }
    if handles.contains(&queue::handle(&flag_buffer)) {
        return Err(crate::error::arg_error!("a device loop's condition flag must not be a state tensor"));
    }
    let check_commands = cond.0.commands.clone();
    if check_commands.iter().any(|c| matches!(c, Command::Loop(_) | Command::Program(_))) {
        return Err(crate::error::unsupported!("a device loop inside a device loop's condition"));
    }
    if body.0.commands.iter().any(|c| matches!(c, Command::Program(_))) {
        return Err(crate::error::unsupported!("a program inside a device loop"));
    }
    let has_loops = body.0.commands.iter().any(|c| matches!(c, Command::Loop(_)));
    // Each check's value folded into an accumulator per evaluation: the condition's at every
    // evaluation (the last, false one too), the body's where the iteration ran (gated by the
    // flag; a body with device loops inside runs only after its condition read true, so its
    // folds need no gate). An inner loop's checks are values its run writes (loop_run's), so
    // they fold like any other.
    let (mut checks, mut accumulators) = (Vec::new(), Vec::new());
    let (mut check_folds, mut body_folds) = (Vec::new(), Vec::new());
    let body_gate = if has_loops { None } else { Some(&flag_buffer) };
    for (program, folds, gate) in [(&cond, &mut check_folds, None), (&body, &mut body_folds, body_gate)] {
        for (template, value) in program.0.check_values() {
            let acc = tensor::alloc(16)?;
            let buffer = acc.get()?;
            folds.push(crate::checks::accumulate(template, value, &buffer, gate)?);
            checks.push(template.clone());
            accumulators.push(buffer);
            tensors.push(acc);
        }
    }
    let zeros = if checks.is_empty() { None } else { Some(crate::ops::layout::fill_on_current(4, 4, 0)?) };
    let pairs: SmallVec<[(&Subbuffer<[u8]>, &Subbuffer<[u8]>); 8]> = pairs.iter().map(|(s, d)| (s, d)).collect();
    let (step_commands, nested) = if has_loops {
        let mut commands: Vec<Command> = body.0.commands.iter().cloned().chain(body_folds).collect();
        commands.extend(aside.into_iter().map(|(c, _)| c));
        queue::copy_commands(&pairs, None, |copy| {
            commands.push(copy);
            Ok(())
        })?;
        (Vec::new(), Some(commands))
    } else if let (Some(check_stages), Some(body_stages), true) = (&cond.0.stages, &body.0.stages, crate::fuse::merging()) {
        // Both programs are small stages: one iteration's are merged anew together with the
        // state's copies (aside, and the gated update: a stage per state tensor), so that those
        // join the merged kernels of the iteration instead of being a level of their own.
        let mut step: Vec<(Command, Option<crate::fuse::Stage>)> =
            check_stages.iter().chain(body_stages).cloned().chain(aside).collect();
        step.extend(check_folds.iter().chain(&body_folds).map(|c| (c.clone(), None)));
        for &(src, dst) in &pairs {
            let one = [(src, dst)];
            queue::copy_commands(&one, Some(&flag_buffer), |copy| {
                let stage = crate::fuse::state_copy(Some(&flag_buffer), src, dst, src.size().min(dst.size()));
                step.push((copy, stage));
                Ok(())
            })?;
        }
        let (step_commands, ..) = crate::fuse::merge(step);
        (crate::capture::by_level(step_commands).0, None)
    } else {
        let mut step_commands = check_commands.clone();
        step_commands.extend(body.0.commands.iter().cloned());
        step_commands.extend(aside.into_iter().map(|(c, _)| c));
        step_commands.extend(check_folds.iter().chain(&body_folds).cloned());
        queue::copy_commands(&pairs, Some(&flag_buffer), |copy| {
            step_commands.push(copy);
            Ok(())
        })?;
        // In dependency levels, as a program's commands: the condition's levels run beside the
        // body's (both only read the state), one barrier between levels.
        (crate::capture::by_level(step_commands).0, None)
    };
    let staging = tensor::raw_buffer(tensor::Kind::Download, 4)?.buffer;
    // The condition run alone (after a chunk) evaluates its checks too.
    let check_commands = check_commands.into_iter().chain(check_folds).collect();
    let l = Loop {
        device,
        state: state_buffers,
        flag: flag_buffer,
        staging,
        check_commands,
        step_commands,
        check: OnceLock::new(),
        step: OnceLock::new(),
        nested,
        checks,
        accumulators,
        zeros,
        _programs: [cond, body],
        _tensors: tensors,
    };
    // Encoded here: a resource of vulkano objects is not UnwindSafe, as a NIF's result must be.
    Ok(ResourceArc::new(LoopRef(Arc::new(l))).encode(env))
}

/// Runs a loop from `initial` (tensors of the state's sizes): queues it (or adds it to the
/// calling process's capture) and returns the final state's tensors at once.
#[rustler::nif]
fn loop_run(env: Env, looped: ResourceArc<LoopRef>, initial: Vec<BufferRef>) -> Result<Vec<BufferRef>> {
    let l = &looped.0;
    let _device = crate::context::use_device(l.device)?;
    let _capture = crate::capture::scope(env);
    if initial.len() != l.state.len() {
        return Err(crate::error::arg_error!("a device loop takes {} tensors, got {}", l.state.len(), initial.len()));
    }
    if let Some(other) = initial.iter().find(|b| b.device != l.device) {
        return Err(Error::OtherDevice(format!(
            "a device loop on Vulkan device {} got a tensor on device {}",
            l.device, other.device
        )));
    }
    let mut in_buffers: SmallVec<[Subbuffer<[u8]>; 8]> = SmallVec::new();
    let mut outputs = Vec::with_capacity(initial.len());
    let mut out_buffers: SmallVec<[Subbuffer<[u8]>; 8]> = SmallVec::new();
    for (t, s) in initial.iter().zip(&l.state) {
        in_buffers.push(t.get()?);
        let out = tensor::alloc(t.bytes)?;
        if s.size() < t.bytes {
            return Err(crate::error::arg_error!("a device loop's initial state tensor is larger than its state"));
        }
        out_buffers.push(out.get()?);
        outputs.push(out);
    }
    // The checks' accumulators start from zeros and end in values of this run's own.
    let mut values = Vec::with_capacity(l.checks.len());
    if let Some(zeros) = &l.zeros {
        for _ in &l.checks {
            in_buffers.push(zeros.get()?);
            let value = tensor::alloc(16)?;
            out_buffers.push(value.get()?);
            values.push(value);
        }
    }
    let from: SmallVec<[&BufferRef; 8]> = initial.iter().collect();
    for out in &outputs {
        crate::checks::inherit(out, &from)?;
    }
    let run = LoopRun { looped: l.clone(), initial: in_buffers, outputs: out_buffers };
    {
        let uses: SmallVec<[&BufferRef; 16]> = initial.iter().chain(&l.zeros).chain(&outputs).chain(&values).collect();
        crate::capture::record(Command::Loop(run), &uses)?;
    }
    // Every output carries every check: the Evaluator would have raised before returning any.
    if !values.is_empty() {
        let checks: Vec<_> =
            l.checks.iter().zip(&values).map(|(t, v)| crate::checks::for_loop_run(t, v)).collect::<Result<_>>()?;
        for out in &outputs {
            crate::checks::attach(out, checks.clone())?;
        }
    }
    Ok(outputs)
}
