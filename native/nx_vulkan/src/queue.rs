//! The pending queue and its recorder.
//!
//! Op NIFs describe their work as a `Command` (a pipeline, its buffers, push constants and group
//! counts, or a buffer copy) and append it to the device's pending list (`Pending`): a short
//! uncontended lock around a `Vec` push, which the GPU thread empties by swapping in its spare
//! `Vec`. One GPU thread owns all
//! recording and submission; it sleeps on a second, control channel and wakes every
//! RECORD_AHEAD pushes to record what is pending into the open command buffer (overlapping the
//! BEAM's next ops), and when a NIF asks for a flush (download, `Nx.Vulkan.flush/0`, the host
//! fallback). A command buffer is submitted, with one fence wait, at a flush or when it holds
//! `batch_max` commands (`NXV_BATCH_MAX`; 0 or 1 submit every command on its own), and earlier,
//! without a wait, once it is due (SUBMIT_BYTES written or SUBMIT_COMMANDS held, or SUBMIT_IDLE
//! held while the GPU has nothing) and fewer than MAX_IN_FLIGHT submissions are on the GPU, so
//! the GPU works while the BEAM queues the rest.
//!
//! Recording is raw (vulkano's unchecked `RecordingCommandBuffer`) with our own hazard tracking
//! over the whole queue (`Hazards`, across command buffers): a global memory barrier goes in only
//! before a command that reads a buffer written since the last barrier, or writes one read or
//! written since then; each drain's pending commands are
//! recorded in dependency order (`by_level`), so independent chains share those barriers.
//! vulkano's auto builder cost ~5 us of CPU per command on the H200 host (recording plus barrier
//! analysis at build); this path costs well under one. Commands keep every buffer and pipeline they use alive until their command
//! buffer's fence has signalled: a tensor garbage-collected while its work is pending or in
//! flight stays alive until that work is done.
use crate::context::{ctx, current, MAX_DEVICES};
use crate::error::{Error, Result};
use crate::window_fuse::{Placed, MAX_CHAIN};
use ash::vk;
use crossbeam_channel::{bounded, unbounded, Receiver, Sender, TryRecvError};
use once_cell::sync::{Lazy, OnceCell};
use smallvec::SmallVec;
use std::collections::HashMap;
use crossbeam_utils::CachePadded;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use vulkano::buffer::Subbuffer;
use vulkano::command_buffer::{
    CommandBuffer, CommandBufferBeginInfo, CommandBufferInheritanceInfo, CommandBufferLevel, CommandBufferUsage,
    CopyBufferInfo, RecordingCommandBuffer,
};
use vulkano::pipeline::{ComputePipeline, Pipeline};
use vulkano::query::{QueryPool, QueryPoolCreateInfo, QueryResultFlags, QueryType};
use vulkano::sync::fence::{Fence, FenceCreateInfo};
use vulkano::sync::{AccessFlags, DependencyInfo, MemoryBarrier, PipelineStage, PipelineStages};
use vulkano::{Handle, VulkanObject};

pub const PUSH_WORDS: usize = 32;

/// One compute dispatch, described, not recorded. A kernel writes its last `writes` bindings and
/// only reads the others (the hazard tracking relies on it). Made by `Dispatch::new`, which
/// reads the bindings' VkBuffer handles on the caller's thread.
#[derive(Clone)]
pub struct Dispatch {
    /// The kernel's name (shaders.rs), for the per-kernel GPU times of `kernel_times`.
    pub name: &'static str,
    /// Possibly not created yet: the GPU thread waits for it when recording (pipelines.rs).
    pub pipeline: crate::pipelines::PipelineRef,
    /// Storage buffers in binding order (set 0, bindings 0..n).
    bindings: SmallVec<[Subbuffer<[u8]>; 4]>,
    /// Their VkBuffer handles, read where the command is made: the handle sits on the cache line
    /// of the buffer's reference count, which the caller has just written (its clone), so the
    /// GPU thread reading it there for the hazard tracking and the descriptors took that line
    /// from the caller's core on every command, and the caller's next clone took it back.
    handles: SmallVec<[u64; 4]>,
    pub push: [u32; PUSH_WORDS],
    pub groups: [u32; 3],
    /// How many of the last bindings the kernel writes (1 for every op's kernel; a fused kernel,
    /// fuse.rs, may write several).
    pub writes: usize,
}

impl Dispatch {
    pub fn new(
        name: &'static str,
        pipeline: crate::pipelines::PipelineRef,
        bindings: SmallVec<[Subbuffer<[u8]>; 4]>,
        push: [u32; PUSH_WORDS],
        groups: [u32; 3],
        writes: usize,
    ) -> Dispatch {
        let handles = bindings.iter().map(handle).collect();
        Dispatch { name, pipeline, bindings, handles, push, groups, writes }
    }

    /// Storage buffers in binding order (set 0, bindings 0..n).
    pub fn bindings(&self) -> &[Subbuffer<[u8]>] {
        &self.bindings
    }

    /// The same dispatch on other buffers.
    pub fn with_bindings(&self, bindings: SmallVec<[Subbuffer<[u8]>; 4]>) -> Dispatch {
        Dispatch::new(self.name, self.pipeline, bindings, self.push, self.groups, self.writes)
    }

    /// Each binding with its handle.
    fn bound(&self) -> impl Iterator<Item = (&Subbuffer<[u8]>, u64)> {
        self.bindings.iter().zip(self.handles.iter().copied())
    }
}

#[derive(Clone)]
pub enum Command {
    Dispatch(Dispatch),
    Copy {
        src: Subbuffer<[u8]>,
        dst: Subbuffer<[u8]>,
        bytes: u64,
    },
    /// A compiled program (capture.rs) run on the caller's inputs into fresh outputs: a
    /// pre-recorded one as copies of `inputs` into its placeholders, its command buffer, copies of
    /// its outputs into `outputs`; any other as its commands recorded with those buffers bound.
    Program(Replay),
    /// A device-side `while` of a compiled program (loops.rs): `initial` copied into the loop's
    /// state, iterations until its condition is false, the state copied into `outputs`. The GPU
    /// thread runs it, reading the condition between chunks of iterations (`Recorder::run_loop`).
    Loop(LoopRun),
}

#[derive(Clone)]
pub struct LoopRun {
    pub looped: Arc<crate::loops::Loop>,
    pub initial: SmallVec<[Subbuffer<[u8]>; 8]>,
    pub outputs: SmallVec<[Subbuffer<[u8]>; 8]>,
}

impl LoopRun {
    fn with_buffers(&self, swap: impl Fn(&Subbuffer<[u8]>) -> Subbuffer<[u8]>) -> LoopRun {
        LoopRun {
            looped: self.looped.clone(),
            initial: self.initial.iter().map(&swap).collect(),
            outputs: self.outputs.iter().map(&swap).collect(),
        }
    }
}

#[derive(Clone)]
pub struct Replay {
    pub program: Arc<crate::capture::Program>,
    pub inputs: SmallVec<[Subbuffer<[u8]>; 8]>,
    pub outputs: SmallVec<[Subbuffer<[u8]>; 8]>,
}

impl Command {
    /// What runs it, for statistics and program_info: a kernel's name, or what the command is.
    pub fn kernel_name(&self) -> &'static str {
        match self {
            Command::Dispatch(d) => d.name,
            Command::Copy { .. } => "buffer_copy",
            Command::Program(_) => "compiled_program",
            // In a command buffer of its own: the state's copy out.
            Command::Loop(_) => "device_loop",
        }
    }

    /// The handles of the buffers the command reads, and of those it writes (every kernel writes
    /// its last bindings; a device loop its outputs). A program is never captured (program_run refuses to run inside
    /// a capture), so it has none here.
    pub fn accesses(&self) -> (SmallVec<[u64; 4]>, SmallVec<[u64; 2]>) {
        match self {
            Command::Dispatch(d) => {
                let (reads, writes) = d.handles.split_at(d.handles.len() - d.writes);
                (SmallVec::from_slice(reads), SmallVec::from_slice(writes))
            }
            Command::Copy { src, dst, .. } => (SmallVec::from_slice(&[handle(src)]), SmallVec::from_slice(&[handle(dst)])),
            Command::Program(_) => (SmallVec::new(), SmallVec::new()),
            Command::Loop(l) => (l.initial.iter().map(handle).collect(), l.outputs.iter().map(handle).collect()),
        }
    }

    /// The command with every buffer it binds replaced by `swap`'s (a replay's substitutes, a
    /// shared buffer). A program has none of its own here.
    pub fn with_buffers(&self, swap: impl Fn(&Subbuffer<[u8]>) -> Subbuffer<[u8]>) -> Command {
        match self {
            Command::Dispatch(d) => Command::Dispatch(d.with_bindings(d.bindings.iter().map(swap).collect())),
            Command::Copy { src, dst, bytes } => Command::Copy { src: swap(src), dst: swap(dst), bytes: *bytes },
            Command::Program(r) => Command::Program(r.clone()),
            Command::Loop(l) => Command::Loop(l.with_buffers(swap)),
        }
    }

    /// GPU commands it stands for (`stats/0`'s `recorded`): a program's own and its copies.
    fn recorded(&self) -> u64 {
        match self {
            Command::Program(r) if r.program.prerecorded() => {
                (r.program.commands.len() + copy_dispatches(r.inputs.len()) + copy_dispatches(r.outputs.len())) as u64
            }
            Command::Program(r) => r.program.commands.len() as u64,
            Command::Loop(l) => (copy_dispatches(l.initial.len()) + copy_dispatches(l.outputs.len())) as u64,
            _ => 1,
        }
    }

    /// What the command writes (a dispatch its last binding, a copy its bytes): what the
    /// pending queue's byte bound counts.
    fn written_bytes(&self) -> u64 {
        match self {
            Command::Dispatch(d) => d.bindings[d.bindings.len() - d.writes..].iter().map(|b| b.size()).sum(),
            Command::Copy { bytes, .. } => *bytes,
            Command::Program(r) => r.outputs.iter().map(|b| b.size()).sum(),
            Command::Loop(l) => l.outputs.iter().map(|b| b.size()).sum(),
        }
    }
}

/// A command on its way through the queue: counted as queued from `record` until dropped, after
/// its command buffer's fence (retire_oldest) or when an error discards it. Counting in Drop
/// covers every path. (A captured command, capture.rs, is not queued, hence the wrapper.)
struct Queued {
    command: Command,
    bytes: u64,
    /// The device whose queue counts it.
    device: usize,
    /// Commands a fused kernel in this one's place stands for as well (window_fuse.rs): kept, and
    /// counted as retired, with it.
    riders: Vec<Queued>,
}

impl Drop for Queued {
    fn drop(&mut self) {
        let retired = &queue_at(self.device).retired;
        retired.commands.fetch_add(1, Ordering::Release);
        retired.bytes.fetch_add(self.bytes, Ordering::Release);
    }
}
/// The pending queue's bound (`Nx.Vulkan.set_pending_limits/1`, `NXV_PENDING_COMMANDS`,
/// `NXV_PENDING_BYTES`): a producer past either waits in `throttle` (a dirty NIF) until the GPU
/// has retired enough. Set at start by the Elixir side.
pub static MAX_QUEUED_COMMANDS: AtomicUsize = AtomicUsize::new(4096);
pub static MAX_QUEUED_BYTES: AtomicU64 = AtomicU64::new(u64::MAX);

/// The current device's queued commands and the bytes they write.
pub fn queued() -> (usize, u64) {
    let q = queue();
    // Retired first: a command is counted as sent before it can be retired, so the sent counts
    // read after it are at least as large.
    let (retired_commands, retired_bytes) =
        (q.retired.commands.load(Ordering::Acquire), q.retired.bytes.load(Ordering::Acquire));
    let (sent_commands, sent_bytes) = (q.sent.commands.load(Ordering::Acquire), q.sent.bytes.load(Ordering::Acquire));
    (sent_commands.saturating_sub(retired_commands), sent_bytes.saturating_sub(retired_bytes))
}

/// Whether the queue is past its bound (a producer should wait in `throttle`).
pub fn over_bound() -> bool {
    let (commands, bytes) = queued();
    commands > MAX_QUEUED_COMMANDS.load(Ordering::Relaxed) || bytes > MAX_QUEUED_BYTES.load(Ordering::Relaxed)
}

#[derive(Clone, Copy, Debug)]
pub enum FlushReason {
    /// A host read of a tensor (`to_binary`, `to_number`, `inspect`...).
    Download = 0,
    Explicit = 1,
    /// The host fallback: the flush before it runs and the downloads of its inputs.
    Fallback = 2,
    BatchCap = 3,
    /// An op that needs a value on the host mid-work: only deferred checks in immediate mode
    /// (`Nx.Vulkan.put_check_mode/1`) do now.
    ValueRead = 4,
    /// `Nx.Defn.Evaluator` reading a `while` condition or a `cond` predicate (its own reads,
    /// not the backend's).
    DefnControl = 5,
    /// An allocation over the memory budget waiting for queued work to return its buffers.
    Reclaim = 6,
    /// A producer at the pending queue's bound (`throttle`).
    Backpressure = 7,
}
const FLUSH_REASONS: usize = 8;
pub const FLUSH_REASON_NAMES: [&str; FLUSH_REASONS] = [
    "download",
    "explicit",
    "fallback",
    "batch_cap",
    "value_read_by_op",
    "defn_control",
    "reclaim",
    "backpressure",
];
/// Host syncs by reason (a caller blocked on a fence), named as `Nx.Vulkan.stats/0` shows them;
/// the batch cap is not one (its submissions do not make the caller wait), so it has no name.
pub const HOST_SYNC_NAMES: [Option<&str>; FLUSH_REASONS] = [
    Some("download"),
    Some("explicit_flush"),
    Some("fallback"),
    None,
    Some("value_read_by_op"),
    Some("defn_control"),
    Some("reclaim"),
    Some("backpressure"),
];

enum Control {
    /// Record what is pending into the open command buffer (submitting it whenever it reaches
    /// the cap): sent every RECORD_AHEAD commands, so recording overlaps the BEAM's next ops.
    /// With a reply, answer once recorded (no submission): a setting that applies to the commands
    /// queued after it waits for this (set_gpu_timing).
    Drain(Option<Sender<()>>),
    /// Record what is pending, submit, wait, and reply with the first error since the last flush.
    Flush(FlushReason, Sender<Result<()>>),
    /// Record what is pending, then submit and retire the oldest submissions until the queue is
    /// back within its bound; reply when it is.
    Throttle(Sender<()>),
}

/// Pending commands that wake the GPU thread to record ahead (recording costs ~2-3 us per
/// command on the H200 host; overlapping it with the BEAM takes it off the critical path).
/// NXV_RECORD_AHEAD (read once, 1 or more) sets another, to measure the trade: fewer commands
/// left to record when a flush comes, against smaller windows for `by_level` to order.
static RECORD_AHEAD: Lazy<usize> = Lazy::new(|| {
    std::env::var("NXV_RECORD_AHEAD").ok().and_then(|v| v.parse::<usize>().ok()).filter(|&n| n >= 1).unwrap_or(8)
});

/// A command writing this fraction of NXV_SUBMIT_BYTES or more asks the GPU thread to record at
/// once (see `record`).
const HEAVY_FRACTION: u64 = 8;

pub static BATCH_MAX: AtomicUsize = AtomicUsize::new(64);
/// How long a thread waiting on the GPU polls before it blocks (NXV_SPIN_US): the GPU thread on a
/// fence and between messages, a caller on its flush's reply. A blocked thread wakes tens of us
/// late on a GPU host (H200, one call: the large MNIST step's 305 us of GPU work waited 350-354
/// us with a 200 us poll, 314-317 with 2 or 20 ms), which is what a short program pays twice
/// (the GPU thread's wake-up at the flush, the caller's at the reply). Set from the device
/// class: on a CPU device (lavapipe) polling steals a core from the threads doing the work.
pub static SPIN_US: AtomicU64 = AtomicU64::new(200);

/// Callers polling for a flush's reply now: past MAX_SPINNING_CALLERS the others block at once,
/// so many waiting processes do not take every core.
static SPINNING_CALLERS: AtomicUsize = AtomicUsize::new(0);
const MAX_SPINNING_CALLERS: usize = 2;

fn spin_budget() -> Duration {
    Duration::from_micros(SPIN_US.load(Ordering::Relaxed))
}

/// How long a flush's waits poll (the GPU thread on the fences, the caller on the reply): a
/// caller is blocked on them, as in CUDA's default synchronize, which spins. FLUSH_SPIN_FACTOR
/// times the spin budget, so 20 ms on GPUs and nothing on CPU devices: a flush of more GPU work
/// than the plain budget (10 ops of 64 M elements: ~1.3 ms on the H200) then ends when the GPU
/// does, not when a blocked thread wakes tens of µs later, twice.
fn flush_spin_budget() -> Duration {
    spin_budget() * FLUSH_SPIN_FACTOR
}

const FLUSH_SPIN_FACTOR: u32 = 20;

/// Calls `attempt` until it yields a value or `budget` has passed (None: the caller blocks
/// instead). It always tries once, so with no budget it is a single check.
fn poll<T>(budget: Duration, mut attempt: impl FnMut() -> Option<T>) -> Option<T> {
    let until = Instant::now() + budget;
    loop {
        if let Some(value) = attempt() {
            return Some(value);
        }
        if Instant::now() > until {
            return None;
        }
        std::hint::spin_loop();
    }
}

/// Waits for `fence` to signal, polling for up to `budget` before a blocking wait.
fn await_fence(fence: &Fence, budget: Duration) -> Result<()> {
    match poll(budget, || match fence.is_signaled() {
        Ok(false) => None,
        signaled => Some(signaled.map(|_| ())),
    }) {
        Some(signaled) => signaled,
        None => fence.wait(None),
    }
    .map_err(|e| Error::vulkan("waiting on a fence", e))
}

/// A caller's place among the MAX_SPINNING_CALLERS that may poll at once, until dropped.
struct SpinningCaller(());

impl SpinningCaller {
    fn enter() -> Option<SpinningCaller> {
        if spin_budget().is_zero() {
            return None;
        }
        if SPINNING_CALLERS.fetch_add(1, Ordering::AcqRel) >= MAX_SPINNING_CALLERS {
            SPINNING_CALLERS.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(SpinningCaller(()))
    }
}

impl Drop for SpinningCaller {
    fn drop(&mut self) {
        SPINNING_CALLERS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Waits for the GPU thread's reply on `rx`, polling for up to `budget` first (see SPIN_US).
fn await_reply<T>(rx: &Receiver<T>, budget: Duration) -> Result<T> {
    if let Some(_spinning) = SpinningCaller::enter() {
        let reply = poll(budget, || match rx.try_recv() {
            Ok(reply) => Some(Ok(reply)),
            Err(TryRecvError::Disconnected) => Some(Err(stopped())),
            Err(TryRecvError::Empty) => None,
        });
        if let Some(reply) = reply {
            return reply;
        }
    }
    rx.recv().map_err(|_| stopped())
}
/// Whether each submission writes a timestamp before its first command and after every command
/// (stats().gpu_ns, and per kernel in KERNEL_TIMES). Off by default: the queries cost a little per
/// command. With it on, a command buffer holds at most TIMED_COMMANDS commands.
pub static GPU_TIMING: AtomicBool = AtomicBool::new(false);
/// With GPU_TIMING: a timestamp after every command (per-kernel times), or only at the start and
/// end of each command buffer. A timestamp waits for the work before it, so per-command ones
/// serialise the dispatches they sit between: the per-batch mode measures without that.
pub static GPU_TIMING_PER_COMMAND: AtomicBool = AtomicBool::new(true);

/// Turns GPU timing on or off (`Nx.Vulkan.set_gpu_timing/1`) for the commands queued from now on:
/// every device's GPU thread first records what is already pending under the old setting (the
/// setting is read when a command is recorded, which may be well after it was queued).
pub fn set_gpu_timing(on: bool, per_command: bool) -> Result<()> {
    for q in QUEUES.iter().filter_map(OnceCell::get) {
        let (tx, rx) = bounded(1);
        q.control.send(Control::Drain(Some(tx))).map_err(|_| stopped())?;
        await_reply(&rx, spin_budget())?;
    }
    GPU_TIMING_PER_COMMAND.store(per_command, Ordering::Relaxed);
    GPU_TIMING.store(on, Ordering::Relaxed);
    Ok(())
}

/// The timestamps a command buffer opened now gets: None (timing off), or whether one follows
/// every command (read once, so a batch and the check against it agree).
fn timing_mode() -> Option<bool> {
    GPU_TIMING.load(Ordering::Relaxed).then(|| GPU_TIMING_PER_COMMAND.load(Ordering::Relaxed))
}

/// Whether GPU timestamps separate every command (`Nx.Vulkan.set_gpu_timing(true)`).
pub fn timing_per_command() -> bool {
    GPU_TIMING.load(Ordering::Relaxed) && GPU_TIMING_PER_COMMAND.load(Ordering::Relaxed)
}
const TIMED_COMMANDS: usize = 1024;

/// GPU time by kernel name while GPU_TIMING is on: (commands, ns from the end of the previous
/// command to the end of this one; overlapping independent commands share their time).
pub static KERNEL_TIMES: Lazy<Mutex<HashMap<&'static str, (u64, u64)>>> = Lazy::new(Default::default);

/// Aligned to cache lines of its own: the GPU thread writes it for every command, and the
/// settings every op reads must not share its lines.
#[repr(align(128))]
pub struct Stats {
    pub recorded: AtomicU64,
    /// Submissions made for their work (SUBMIT_BYTES), before a flush or the cap asked.
    pub early_submissions: AtomicU64,
    /// Chunks of device-loop iterations the GPU thread submitted and waited for (loops.rs),
    /// and the iterations they ran (including those after the condition turned false).
    pub loop_chunks: AtomicU64,
    pub loop_iterations: AtomicU64,
    pub barriers: AtomicU64,
    /// Commands the window's fused kernels replaced, and those kernels (window_fuse.rs).
    pub window_replaced: AtomicU64,
    pub window_kernels: AtomicU64,
    pub submissions: AtomicU64,
    /// Primary command buffers those submissions carried (a long batch records several:
    /// SEGMENT_COMMANDS).
    pub command_buffers: AtomicU64,
    pub flushes: [AtomicU64; FLUSH_REASONS],
    /// Flushes whose caller waited on a fence (there was work pending or in flight), by reason.
    pub host_syncs: [AtomicU64; FLUSH_REASONS],
    /// Nanoseconds the GPU thread spent recording, ending + submitting, and waiting on fences.
    pub record_ns: AtomicU64,
    /// Of record_ns: opening command buffers (allocation and begin; for a long batch's later
    /// segments, ending the one before as well).
    pub record_begin_ns: AtomicU64,
    /// Of record_ns: the driver's calls that record dispatches and their barriers, measured only
    /// with NXV_PROFILE_RECORDING=1 (two more clock reads a command).
    pub record_driver_ns: AtomicU64,
    pub submit_ns: AtomicU64,
    pub wait_ns: AtomicU64,
    /// GPU time between the first and last command of each submission (timestamp queries), when
    /// GPU_TIMING is on.
    pub gpu_ns: AtomicU64,
}

impl Stats {
    const fn new() -> Stats {
        Stats {
            recorded: AtomicU64::new(0),
            early_submissions: AtomicU64::new(0),
            loop_chunks: AtomicU64::new(0),
            loop_iterations: AtomicU64::new(0),
            barriers: AtomicU64::new(0),
            window_replaced: AtomicU64::new(0),
            window_kernels: AtomicU64::new(0),
            submissions: AtomicU64::new(0),
            command_buffers: AtomicU64::new(0),
            flushes: [const { AtomicU64::new(0) }; FLUSH_REASONS],
            host_syncs: [const { AtomicU64::new(0) }; FLUSH_REASONS],
            record_ns: AtomicU64::new(0),
            record_begin_ns: AtomicU64::new(0),
            record_driver_ns: AtomicU64::new(0),
            submit_ns: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
            gpu_ns: AtomicU64::new(0),
        }
    }
}

/// One device's pending queue: the channels to its GPU thread, and its counters.
struct DeviceQueue {
    pending: Arc<Pending>,
    control: Sender<Control>,
    /// Commands (and the bytes they write) queued since start, and retired since start: what
    /// is queued now (pending, in the open command buffer or in flight) is the difference.
    /// Callers write only `sent` and the GPU thread only `retired`, each on a cache line of its
    /// own, so an op's counting takes no line from the GPU thread's core (with a counter both
    /// wrote, every op moved it between the two cores).
    sent: CachePadded<Sent>,
    retired: CachePadded<Retired>,
    /// Set while a Drain is on its way, so a burst of commands wakes the thread once.
    drain_requested: CachePadded<AtomicBool>,
    stats: Stats,
}

/// The commands callers queued that the GPU thread has not taken yet. A lock around a `Vec`
/// rather than a channel: a push is one uncontended lock and a copy into capacity the list
/// keeps (the GPU thread swaps the whole list out for its emptied spare), where crossbeam's
/// unbounded channel allocated and zeroed a block every 31 commands, freed by the GPU thread,
/// and spent ~12% of an eager op's NIF time in perf (the binary op NIF, lavapipe host).
#[derive(Default)]
struct Pending(CachePadded<Mutex<Vec<Queued>>>);

impl Pending {
    fn push(&self, queued: Queued) {
        // A panic while the lock is held can only come from the push's allocation (an abort):
        // a poisoned list is still whole.
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(queued);
    }

    /// Everything pending, taken at once: `spare` (empty) goes in its place.
    fn take(&self, spare: &mut Vec<Queued>) {
        std::mem::swap(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()), spare);
    }
}

/// The callers' counters (see DeviceQueue).
#[derive(Default)]
struct Sent {
    commands: AtomicUsize,
    bytes: AtomicU64,
    /// `commands` when a caller last asked the GPU thread to record ahead.
    drain_asked_at: AtomicUsize,
}

/// The GPU thread's counters (see DeviceQueue).
#[derive(Default)]
struct Retired {
    commands: AtomicUsize,
    bytes: AtomicU64,
}

static QUEUES: [OnceCell<DeviceQueue>; MAX_DEVICES] = [const { OnceCell::new() }; MAX_DEVICES];

/// The current device's queue.
fn queue() -> &'static DeviceQueue {
    queue_at(current())
}

/// Device `device`'s queue, with its GPU thread started on first use.
fn queue_at(device: usize) -> &'static DeviceQueue {
    QUEUES[device].get_or_init(|| {
        let pending = Arc::new(Pending::default());
        let gpu_pending = pending.clone();
        let (control_tx, control_rx) = unbounded::<Control>();
        std::thread::Builder::new()
            .name(format!("nx_vulkan_gpu_{device}"))
            // Vulkan drivers (lavapipe especially) want more stack than a BEAM scheduler has.
            .stack_size(16 << 20)
            .spawn(move || {
                crate::context::set_thread_device(device);
                gpu_thread(&gpu_pending, control_rx)
            })
            .expect("spawning the nx_vulkan GPU thread");
        DeviceQueue {
            pending,
            control: control_tx,
            sent: CachePadded::default(),
            retired: CachePadded::default(),
            drain_requested: CachePadded::new(AtomicBool::new(false)),
            stats: Stats::new(),
        }
    })
}

/// The current device's counters.
pub fn stats() -> &'static Stats {
    &queue().stats
}

fn stopped() -> Error {
    Error::Vulkan("the GPU thread has stopped".into())
}

/// Queues a command; returns at once. The GPU thread is asked to record what is pending every
/// RECORD_AHEAD commands (or at the cap if that is smaller), and at once for a command the GPU
/// should start early: a compiled program or device loop (NXV_SUBMIT_PROGRAMS), or one that
/// writes an eighth of NXV_SUBMIT_BYTES or more (work-based submission). Nothing else wakes it:
/// a GPU thread that took each command as it arrived (as it did while polling) moved the
/// queue's lines between its core and the caller's on every op.
pub fn record(command: Command) -> Result<()> {
    let bytes = command.written_bytes();
    let urgent = matches!(command, Command::Program(_) | Command::Loop(_)) || {
        let heavy = SUBMIT_BYTES.load(Ordering::Relaxed);
        heavy > 0 && bytes >= heavy / HEAVY_FRACTION
    };
    let device = current();
    let q = queue_at(device);
    let sent = q.sent.commands.fetch_add(1, Ordering::Relaxed) + 1;
    q.sent.bytes.fetch_add(bytes, Ordering::Relaxed);
    q.pending.push(Queued { command, bytes, device, riders: Vec::new() });
    if urgent || sent.wrapping_sub(q.sent.drain_asked_at.load(Ordering::Relaxed)) >= batch_max().min(*RECORD_AHEAD) {
        q.sent.drain_asked_at.store(sent, Ordering::Relaxed);
        if !q.drain_requested.swap(true, Ordering::AcqRel) {
            q.control.send(Control::Drain(None)).map_err(|_| stopped())?;
        }
    }
    Ok(())
}

/// Commands per command buffer: NXV_BATCH_MAX, where 0 means 1 (every command on its own).
fn batch_max() -> usize {
    BATCH_MAX.load(Ordering::Relaxed).max(1)
}

/// Submits everything pending and waits for it; returns the first error recorded since the last flush.
pub fn flush(reason: FlushReason) -> Result<()> {
    let (tx, rx) = bounded(1);
    let q = queue();
    // The flush takes everything sent so far: the next record-ahead request counts from here, so
    // the windows of a loop's steps start where each step does (the same chains every step for
    // window_fuse.rs, not ones cut where the count happens to fall).
    q.sent.drain_asked_at.store(q.sent.commands.load(Ordering::Relaxed), Ordering::Relaxed);
    q
        .control
        .send(Control::Flush(reason, tx))
        .map_err(|_| stopped())?;
    await_reply(&rx, flush_spin_budget())?
}

/// Waits (on the caller's dirty scheduler) until the queue is within its bound; returns at once
/// if it is.
pub fn throttle() -> Result<()> {
    if !over_bound() {
        return Ok(());
    }
    let (tx, rx) = bounded(1);
    queue().control.send(Control::Throttle(tx)).map_err(|_| stopped())?;
    await_reply(&rx, spin_budget())
}

fn gpu_thread(pending: &Pending, control: Receiver<Control>) {
    let mut recorder = Recorder::default();
    while let Some(message) = next_message(&control, &mut recorder) {
        let _inside = crate::exit_guard::enter();
        match message {
            Control::Drain(reply) => {
                // A reply is awaited by a caller that needs everything recorded.
                recorder.drain(pending, reply.is_some());
                if let Some(reply) = reply {
                    let _ = reply.send(());
                }
            }
            Control::Flush(reason, reply) => {
                let started = Instant::now();
                let recorded = stats().recorded.load(Ordering::Relaxed);
                stats().flushes[reason as usize].fetch_add(1, Ordering::Relaxed);
                recorder.drain(pending, true);
                // A flush with nothing queued since the last one returns without a fence wait.
                // Counted by what was queued, not by what is still on the GPU, so the count does
                // not depend on how far the GPU got (early and idle submission).
                if recorder.taken_commands > recorder.taken_at_flush {
                    stats().host_syncs[reason as usize].fetch_add(1, Ordering::Relaxed);
                }
                recorder.taken_at_flush = recorder.taken_commands;
                // The caller needs the work done, not its resources released: the flush answers
                // once every fence has signalled and releases after (dropping a submission's
                // commands and command buffer took ~8 us for 43 commands on lavapipe), except
                // where the caller needs the release itself (a reclaim retries an allocation)
                // or the GPU times it reads (taken when a submission retires).
                let release_first = matches!(reason, FlushReason::Reclaim) || timing_mode().is_some();
                let name = FLUSH_REASON_NAMES[reason as usize];
                recorder.guarded(|r| r.submit(release_first, name));
                if !release_first {
                    recorder.guarded(|r| r.settle(flush_spin_budget()));
                }
                let _ = reply.send(recorder.error.take().map_or(Ok(()), Err));
                let waited = started.elapsed();
                // Signalled already: no wait (each call takes one off). An error here goes to
                // the next flush.
                while !recorder.in_flight.is_empty() {
                    recorder.guarded(|r| r.retire_oldest(Duration::ZERO));
                }
                let commands = stats().recorded.load(Ordering::Relaxed) - recorded;
                crate::events::flush(reason, commands, waited.as_micros() as u64);
            }
            Control::Throttle(reply) => {
                let started = Instant::now();
                let recorded = stats().recorded.load(Ordering::Relaxed);
                // Counted as a flush and a host sync: a producer waits for the GPU here.
                stats().flushes[FlushReason::Backpressure as usize].fetch_add(1, Ordering::Relaxed);
                stats().host_syncs[FlushReason::Backpressure as usize].fetch_add(1, Ordering::Relaxed);
                recorder.drain(pending, true);
                while over_bound() {
                    if recorder.open.is_some() {
                        recorder.guarded(|r| r.submit(false, "backpressure"));
                    } else if !recorder.in_flight.is_empty() {
                        // An error here is kept for the next flush, like any recording error.
                        recorder.guarded(|r| r.retire_oldest(spin_budget()));
                    } else {
                        break;
                    }
                }
                let _ = reply.send(());
                let commands = stats().recorded.load(Ordering::Relaxed) - recorded;
                crate::events::flush(FlushReason::Backpressure, commands, started.elapsed().as_micros() as u64);
            }
        }
    }
}

/// The GPU thread's next message (None once the queue is gone). It polls the control channel for
/// up to the spin budget first (see SPIN_US), so neither the next flush nor a requested drain (a
/// compiled program's replay among them, see `record`) waits for the thread to wake; it leaves
/// the pending channel alone until asked, so callers' pushes stay on their own core.
fn next_message(control: &Receiver<Control>, recorder: &mut Recorder) -> Option<Control> {
    let spin = spin_budget();
    if !spin.is_zero() {
        let until = Instant::now() + spin;
        loop {
            match control.try_recv() {
                Ok(message) => return Some(message),
                Err(TryRecvError::Disconnected) => return None,
                Err(TryRecvError::Empty) => {}
            }
            if Instant::now() > until {
                break;
            } else {
                // A due batch waiting for room on the GPU goes as soon as there is some.
                if recorder.due().is_some() {
                    let _inside = crate::exit_guard::enter();
                    recorder.submit_if_due(false);
                } else if *IDLE_DRAIN && recorder.idle_with_pending() {
                    // The GPU has run out of work while commands wait for the next record-ahead
                    // request: take them now (idle submission sends them on).
                    return Some(Control::Drain(None));
                }
                std::hint::spin_loop();
            }
        }
    }
    if recorder.due().is_some() {
        let _inside = crate::exit_guard::enter();
        recorder.submit_if_due(true);
    }
    control.recv().ok()
}

/// NXV_IDLE_DRAIN=1 (read once): the polling GPU thread takes pending commands as soon as the GPU
/// has nothing to run instead of leaving them for the next record-ahead request. Off: on an H100
/// (one call, f3c74e0) it sent more, smaller command buffers and slowed the eager slice loop
/// (48.1 against 34.5 us an iteration) and the Evaluator's (113.4 against 97.4), with no gain the
/// host's noise let through on the MNIST step; kept to measure on other devices.
static IDLE_DRAIN: Lazy<bool> = Lazy::new(|| crate::policy::env_switch("NXV_IDLE_DRAIN") == Some(true));

/// The command buffer being recorded, with the commands it uses (kept alive until its fence).
struct OpenBatch {
    /// The command buffer being recorded: the batch's last (see `sealed`).
    cb: RecordingCommandBuffer,
    /// The batch's earlier command buffers, ended at SEGMENT_COMMANDS commands each and submitted
    /// with `cb` in one vkQueueSubmit (one fence): a long batch records as segments of moderate
    /// length, where drivers record a command fastest.
    sealed: Vec<CommandBuffer>,
    /// `commands.len()` when `cb` was begun.
    segment_start: usize,
    commands: Vec<Queued>,
    hazards: Hazards,
    timestamps: Option<Arc<QueryPool>>,
    /// Whether `timestamps` has one after every command (else only at the end).
    per_command: bool,
    recording_ns: u64,
    /// What its commands write (Command::written_bytes), for SUBMIT_BYTES.
    written_bytes: u64,
    /// The pipeline bound last, so consecutive dispatches of one kernel bind it once.
    bound_pipeline: vk::Pipeline,
}

/// Queue entries a command buffer of a batch holds before the next begins (`OpenBatch::sealed`).
/// A command costs a driver more to record in a very long command buffer: H100, driver
/// 580.159.04, bench/host_overhead.exs's batches of 5000 alternated three times on one host
/// (2026-12-07): 2.98 / 2.84 / 2.57 us a command as segments of 512 against 6.93 / 8.01 / 5.90 in
/// one command buffer, the driver's dispatch calls 1.61 against 5.27 us (record_probe earlier:
/// 403 ns a dispatch in command buffers of 2000, 770 in ones of 20000). A segment's own cost
/// (ending one, beginning the next: a few us there) is then ~0.01 us a command. Batches within
/// the default cap (64) never reach it.
const SEGMENT_COMMANDS: usize = 512;

impl OpenBatch {
    /// Ends the command buffer being recorded and begins the next one of the batch. Barriers need
    /// nothing here (the hazard sets follow the queue, and a barrier's first scope is everything
    /// earlier in submission order); the bound pipeline does not carry over to a new command
    /// buffer.
    fn seal_segment(&mut self) -> Result<()> {
        let started = Instant::now();
        let next = command_buffer(CommandBufferLevel::Primary, CommandBufferUsage::OneTimeSubmit, None)?;
        let ended = unsafe { std::mem::replace(&mut self.cb, next).end() }
            .map_err(|e| Error::vulkan("ending a command buffer", e))?;
        self.sealed.push(ended);
        self.segment_start = self.commands.len();
        self.bound_pipeline = vk::Pipeline::null();
        stats().record_begin_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }
}

#[derive(Default)]
struct Recorder {
    open: Option<OpenBatch>,
    /// Submitted command buffers not yet known to be done, oldest first (at most MAX_IN_FLIGHT).
    in_flight: std::collections::VecDeque<InFlight>,
    /// The first failure since the last flush, reported by that flush.
    error: Option<Error>,
    /// Fences and timestamp query pools of retired submissions, for reuse.
    free_fences: Vec<Arc<Fence>>,
    free_timestamps: Vec<Arc<QueryPool>>,
    /// The list `drain` swaps into the pending one (empty between drains; see `Pending`).
    taken: Vec<Queued>,
    /// Commands taken from the pending list since start (compared with the callers' `sent`
    /// count by `idle_with_pending`).
    taken_commands: usize,
    /// `taken_commands` at the last flush.
    taken_at_flush: usize,
    /// The queue's hazards while no batch is open (the last submitted batch's, which the next one
    /// continues).
    carried_hazards: Hazards,
    /// Chains of element-wise commands seen in the windows, and their fused kernels.
    fuser: crate::window_fuse::WindowFuser,
    /// Commands taken but not recorded: the last window's, whose fusion chain may go on in the
    /// next (see `drain`); recorded first at the next drain.
    held: Vec<Queued>,
}

/// A submitted command buffer and everything it uses, kept until its fence signals.
struct InFlight {
    fence: Arc<Fence>,
    _cb: CommandBuffer,
    /// A long batch's earlier command buffers (`OpenBatch::sealed`; empty, unallocated, for most).
    _sealed: Vec<CommandBuffer>,
    commands: Vec<Queued>,
    timestamps: Option<Arc<QueryPool>>,
    per_command: bool,
    submitted: Instant,
}

/// Submissions allowed on the GPU at once: one running while the next is recorded.
const MAX_IN_FLIGHT: usize = 2;
/// Whether a compiled program's replay is submitted as soon as it is recorded (NXV_SUBMIT_PROGRAMS),
/// like a CUDA graph's launch, rather than with the next flush or at the cap: with the GPU thread
/// polling (SPIN_US), the GPU starts the program while its caller is still in Elixir, on its way
/// to the read that flushes. A replay is a whole step's work, worth a submission of its own.
pub static SUBMIT_PROGRAMS: AtomicBool = AtomicBool::new(false);

/// Work-based submission (NXV_SUBMIT_BYTES; 0 turns it off): an open command buffer whose
/// commands write at least this many bytes goes to the GPU as soon as fewer than MAX_IN_FLIGHT
/// submissions are on it, rather than at the next flush or the cap. A large kernel then starts
/// while the BEAM is still queueing the next ones: on the H200 a 64 M-element negate ran its
/// 132 us kernel at PyTorch's speed but took 149 us a call when ten waited for the flush, the GPU
/// idle until then. Small work (the seed's MNIST step writes kilobytes per op) keeps its batches:
/// submitting every few commands measured slower there (b368ab7: 0.52 vs 0.40 ms a step).
pub static SUBMIT_BYTES: AtomicU64 = AtomicU64::new(0);

/// Count-based submission (NXV_SUBMIT_COMMANDS; 0 turns it off): an open command buffer of this
/// many commands goes to the GPU as soon as fewer than MAX_IN_FLIGHT submissions are on it, like
/// a heavy one (SUBMIT_BYTES). A step of small ops then runs on the GPU while the BEAM queues the
/// rest, rather than all of it after the read that flushes: on the H200 (one call) the seed's
/// MNIST step took 0.661 ms at cap 64 with every command waiting for the loss read, 0.32 with
/// batches of 8 submitted while the GPU had room, 0.29 with batches of 16 (the cap at 16), the
/// Evaluator's floor 0.10-0.19 ms; JAX jit 0.290 in the same call. Unlike a cap of 16, the
/// batch keeps filling while two submissions are on the GPU instead of waiting for one.
pub static SUBMIT_COMMANDS: AtomicUsize = AtomicUsize::new(0);

/// Idle submission (NXV_SUBMIT_IDLE; 0 turns it off): an open command buffer of this many
/// commands goes to the GPU at once when nothing is in flight, so an idle GPU starts on the first
/// commands of a step instead of waiting for SUBMIT_COMMANDS of them. H100, one call, the seed's
/// MNIST step under the Evaluator alternated twice (4666ab5 + this rule): 0.249 / 0.249 ms with
/// 2, 0.251-0.309 with 4, 0.256 / 0.256 with 8, 0.256-0.288 without; its GPU time (~154 us a
/// step, 34 barriers at ~3.5 us each in arrival order) is as long as the caller's, so a late
/// start is paid at the end.
pub static SUBMIT_IDLE: AtomicUsize = AtomicUsize::new(0);

/// The barriers the hazard tracking puts between `commands` recorded in this order.
pub fn barriers_needed(commands: &[Command]) -> usize {
    let mut hazards = Hazards::default();
    commands
        .iter()
        .filter(|c| {
            let (reads, writes) = c.accesses();
            hazards.needs_barrier(&reads, &writes)
        })
        .count()
}

/// The dependency level of each command: one after the last command before it that wrote what it
/// reads, or read or wrote what it writes (0 for a command that depends on none).
pub fn levels(commands: &[Command]) -> Vec<usize> {
    let mut written_at: HashMap<u64, usize> = HashMap::new();
    let mut read_at: HashMap<u64, usize> = HashMap::new();
    let mut levels = Vec::with_capacity(commands.len());
    for command in commands {
        let (reads, writes) = command.accesses();
        let after = |at: Option<&usize>| at.map_or(0, |l| l + 1);
        let level = reads
            .iter()
            .map(|r| after(written_at.get(r)))
            .chain(writes.iter().flat_map(|w| [after(written_at.get(w)), after(read_at.get(w))]))
            .max()
            .unwrap_or(0);
        for r in reads {
            let at = read_at.entry(r).or_insert(level);
            *at = (*at).max(level);
        }
        for w in writes {
            written_at.insert(w, level);
        }
        levels.push(level);
    }
    levels
}

/// How many pending commands the GPU thread takes at a time to record in dependency order.
const REORDER_WINDOW: usize = 16;

/// NXV_REORDER=0 (read once) records commands in arrival order (to measure what `by_level` saves).
static REORDER: Lazy<bool> = Lazy::new(|| crate::policy::env_switch("NXV_REORDER") != Some(false));

/// Puts each run of dispatches and copies in `window` (a program or a device loop stays where it
/// is, and so splits the runs) in order of dependency level, stably: a command goes after every
/// earlier command of its run that wrote what it reads or touched what it writes, and behind a
/// barrier (level 1 or more) where it touches what the queue's commands (`hazards`) wrote or
/// read since the last barrier. Commands of one level are independent of each other, so the
/// hazard tracking records the run with one barrier a level instead of one wherever arrival
/// order alternates between independent chains, and what each command computes is unchanged.
/// The seed's MNIST step under the Evaluator arrives as 43 commands needing 34 barriers in that
/// order and 19 levels, and a dependent dispatch costs an NVIDIA GPU ~3.6 us of drain and
/// relaunch (README, What a dependent dispatch costs).
fn by_level(window: &mut Vec<Queued>, hazards: &Hazards) {
    let mut start = 0;
    while start < window.len() {
        let plain = |q: &Queued| matches!(q.command, Command::Dispatch(_) | Command::Copy { .. });
        let end = window[start..].iter().position(|q| !plain(q)).map_or(window.len(), |i| start + i);
        if end - start > 1 {
            order_run(&mut window[start..end], hazards);
        }
        start = end + 1;
    }
}

fn order_run(run: &mut [Queued], hazards: &Hazards) {
    let accesses: SmallVec<[(SmallVec<[u64; 4]>, SmallVec<[u64; 2]>); REORDER_WINDOW]> =
        run.iter().map(|q| q.command.accesses()).collect();
    let mut levels: SmallVec<[usize; REORDER_WINDOW]> = SmallVec::new();
    for (i, (reads, writes)) in accesses.iter().enumerate() {
        let behind_barrier = hazards.conflicts(reads, writes);
        let level = (0..i)
            .filter(|&j| {
                let (earlier_reads, earlier_writes) = &accesses[j];
                earlier_writes.iter().any(|w| reads.contains(w) || writes.contains(w))
                    || earlier_reads.iter().any(|r| writes.contains(r))
            })
            .map(|j| levels[j] + 1)
            .max()
            .unwrap_or(0)
            .max(behind_barrier as usize);
        levels.push(level);
    }
    if levels.windows(2).all(|pair| pair[0] <= pair[1]) {
        return;
    }
    // A stable sort of the run by level (SmallVec's sort is stable, as the slice's is).
    let mut order: SmallVec<[usize; REORDER_WINDOW]> = (0..run.len()).collect();
    order.sort_by_key(|&i| levels[i]);
    permute(run, &order);
}

/// Rearranges `items` so that position k holds what was at `order[k]`.
fn permute<T>(items: &mut [T], order: &[usize]) {
    let mut done: SmallVec<[bool; REORDER_WINDOW]> = SmallVec::from_elem(false, items.len());
    for start in 0..items.len() {
        // Follow the cycle through `start`: position k takes the item at order[k].
        let mut k = start;
        while !done[k] {
            done[k] = true;
            let next = order[k];
            if next == start {
                break;
            }
            items.swap(k, next);
            k = next;
        }
    }
}

/// Buffers touched since the last barrier, by handle: on the queue, not in one command buffer. A
/// barrier's first scope is every command submitted earlier to the queue, so a command buffer
/// needs no barrier of its own at the start: its first command that depends on an earlier
/// submission's gets one, as any dependent command does. A full barrier opening every command
/// buffer made the GPU drain between independent batches: H100, bench/record_probe, one-workgroup
/// dispatches in command buffers of 16 / 64, 821 / 382 ns of GPU wall a dispatch with it against
/// 590 / 298 without (its CPU cost was lost in the noise).
#[derive(Default)]
struct Hazards {
    written: foldhash::HashSet<u64>,
    read: foldhash::HashSet<u64>,
    /// Commands whose accesses the sets do not hold ran since the last barrier (a device loop's
    /// secondary command buffers, or a batch dropped half-recorded on an error, whose barriers
    /// never ran): the next command needs a barrier whatever it touches.
    untracked: bool,
}

/// Buffers the hazard sets hold at most before a barrier empties them: a long stream of
/// independent commands over ever new buffers would otherwise grow them without end, now that
/// they outlive command buffers.
const MAX_TRACKED: usize = 4096;

impl Hazards {
    /// Forgets every access (a barrier was recorded), keeping the capacity.
    fn clear(&mut self) {
        self.written.clear();
        self.read.clear();
        self.untracked = false;
    }

    /// Commands the sets cannot follow ran after the last barrier: forgets every access and asks
    /// a barrier of the next command.
    fn lose_track(&mut self) {
        self.clear();
        self.untracked = true;
    }

    /// Whether a command reading `reads` and writing `writes` touches what was written since the
    /// last barrier, or writes what was read since then.
    fn conflicts(&self, reads: &[u64], writes: &[u64]) -> bool {
        self.untracked
            || reads.iter().any(|r| self.written.contains(r))
            || writes.iter().any(|w| self.written.contains(w) || self.read.contains(w))
    }

    /// Whether a command reading `reads` and writing `write` needs a barrier first; records its
    /// accesses either way (after clearing them when it does).
    fn needs_barrier(&mut self, reads: &[u64], writes: &[u64]) -> bool {
        let hazard = self.conflicts(reads, writes) || self.written.len() + self.read.len() >= MAX_TRACKED;
        if hazard {
            self.clear();
        }
        self.read.extend(reads.iter().copied());
        self.written.extend(writes.iter().copied());
        hazard
    }
}

/// Records one dispatch with direct Vulkan calls (vulkano's unchecked wrappers still build and
/// allocate per call: ~4.7 us per command on the H200 host). The pipeline layout declares set 0
/// as push descriptors and a 128-byte push-constant range (see pipelines.rs).
unsafe fn record_dispatch(
    cb: vk::CommandBuffer,
    d: &Dispatch,
    bindings: &[(&Subbuffer<[u8]>, u64)],
    created: &ComputePipeline,
    bound: &mut vk::Pipeline,
) {
    let device = &created.device();
    let fns = device.fns();
    let layout = created.layout().handle();
    let pipeline = created.handle();
    unsafe {
        if *bound != pipeline {
            (fns.v1_0.cmd_bind_pipeline)(cb, vk::PipelineBindPoint::COMPUTE, pipeline);
            *bound = pipeline;
        }
        let infos: SmallVec<[vk::DescriptorBufferInfo; 4]> = bindings
            .iter()
            .map(|&(b, h)| vk::DescriptorBufferInfo {
                buffer: vk::Buffer::from_raw(h),
                offset: b.offset(),
                range: b.size(),
            })
            .collect();
        let writes: SmallVec<[vk::WriteDescriptorSet; 4]> = infos
            .iter()
            .enumerate()
            .map(|(i, info)| vk::WriteDescriptorSet {
                dst_binding: i as u32,
                descriptor_count: 1,
                descriptor_type: vk::DescriptorType::STORAGE_BUFFER,
                p_buffer_info: info,
                ..Default::default()
            })
            .collect();
        (fns.khr_push_descriptor.cmd_push_descriptor_set_khr)(
            cb,
            vk::PipelineBindPoint::COMPUTE,
            layout,
            0,
            writes.len() as u32,
            writes.as_ptr(),
        );
        (fns.v1_0.cmd_push_constants)(
            cb,
            layout,
            vk::ShaderStageFlags::COMPUTE,
            0,
            (PUSH_WORDS * 4) as u32,
            d.push.as_ptr() as *const std::ffi::c_void,
        );
        (fns.v1_0.cmd_dispatch)(cb, d.groups[0], d.groups[1], d.groups[2]);
    }
}

/// NXV_PROFILE_RECORDING=1 (read once): time the driver's share of recording (record_driver_ns).
static PROFILE_RECORDING: Lazy<bool> = Lazy::new(|| crate::policy::env_switch("NXV_PROFILE_RECORDING") == Some(true));

/// A global memory barrier between compute/transfer writes and later compute/transfer accesses.
unsafe fn record_compute_barrier(cb: vk::CommandBuffer, pipeline: &ComputePipeline) {
    let stages = vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER;
    let barrier = vk::MemoryBarrier {
        src_access_mask: vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE,
        dst_access_mask: vk::AccessFlags::SHADER_READ
            | vk::AccessFlags::SHADER_WRITE
            | vk::AccessFlags::TRANSFER_READ
            | vk::AccessFlags::TRANSFER_WRITE,
        ..Default::default()
    };
    unsafe {
        (pipeline.device().fns().v1_0.cmd_pipeline_barrier)(
            cb,
            stages,
            stages,
            vk::DependencyFlags::empty(),
            1,
            &barrier,
            0,
            std::ptr::null(),
            0,
            std::ptr::null(),
        );
    }
}

pub fn handle(buffer: &Subbuffer<[u8]>) -> u64 {
    buffer.buffer().handle().as_raw()
}

fn all_memory_barrier(dst_host: bool) -> DependencyInfo {
    let stages = PipelineStages::COMPUTE_SHADER | PipelineStages::ALL_TRANSFER;
    let access = AccessFlags::SHADER_READ
        | AccessFlags::SHADER_WRITE
        | AccessFlags::TRANSFER_READ
        | AccessFlags::TRANSFER_WRITE;
    let (dst_stages, dst_access) = if dst_host {
        (PipelineStages::HOST, AccessFlags::HOST_READ)
    } else {
        (stages, access)
    };
    DependencyInfo {
        memory_barriers: [MemoryBarrier {
            src_stages: stages,
            src_access: AccessFlags::SHADER_WRITE | AccessFlags::TRANSFER_WRITE,
            dst_stages,
            dst_access,
            ..Default::default()
        }]
        .into_iter()
        .collect(),
        ..Default::default()
    }
}

/// Records a dispatch or a copy (a barrier first where the hazard tracking asks for one).
unsafe fn record_into(
    cb: &mut RecordingCommandBuffer,
    hazards: &mut Hazards,
    bound: &mut vk::Pipeline,
    command: &Command,
) -> Result<()> {
    unsafe {
        match command {
            Command::Copy { src, dst, bytes } => {
                if hazards.needs_barrier(&[handle(src)], &[handle(dst)]) {
                    cb.pipeline_barrier_unchecked(&all_memory_barrier(false));
                    stats().barriers.fetch_add(1, Ordering::Relaxed);
                }
                cb.copy_buffer_unchecked(&CopyBufferInfo::buffers(src.clone().slice(..*bytes), dst.clone().slice(..*bytes)));
            }
            Command::Dispatch(d) => {
                let bindings: SmallVec<[_; 4]> = d.bound().collect();
                record_dispatch_tracked(cb, hazards, bound, d, &bindings)?;
            }
            Command::Program(_) => return Err(Error::Vulkan("a program inside a program".into())),
            Command::Loop(_) => return Err(Error::Vulkan("a device loop inside a pre-recorded command buffer".into())),
        }
    }
    Ok(())
}

/// Records dispatch `d` on `bindings` (its own, or a replay's substitutes for them), a barrier
/// first where the hazard tracking asks for one.
unsafe fn record_dispatch_tracked(
    cb: &mut RecordingCommandBuffer,
    hazards: &mut Hazards,
    bound: &mut vk::Pipeline,
    d: &Dispatch,
    bindings: &[(&Subbuffer<[u8]>, u64)],
) -> Result<()> {
    let created = d.pipeline.get()?;
    let (reads, writes) = bindings.split_at(bindings.len() - d.writes);
    let reads: SmallVec<[u64; 4]> = reads.iter().map(|b| b.1).collect();
    let writes: SmallVec<[u64; 2]> = writes.iter().map(|b| b.1).collect();
    let barrier = hazards.needs_barrier(&reads, &writes);
    let started = PROFILE_RECORDING.then(Instant::now);
    unsafe {
        if barrier {
            record_compute_barrier(cb.handle(), created);
        }
        record_dispatch(cb.handle(), d, bindings, created, bound);
    }
    if let Some(started) = started {
        stats().record_driver_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
    if barrier {
        stats().barriers.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// The buffer a replay binds in place of the captured `buffer` (itself when it is an intermediate).
pub fn substitute<'r>(substitutes: &[(u64, &'r Subbuffer<[u8]>)], buffer: &'r Subbuffer<[u8]>) -> &'r Subbuffer<[u8]> {
    substitute_bound(substitutes, (buffer, handle(buffer))).0
}

/// `substitute` for a binding whose handle is known (a dispatch's `bound()`), with the handle of
/// what is bound in its place.
fn substitute_bound<'r>(substitutes: &[(u64, &'r Subbuffer<[u8]>)], (buffer, h): (&'r Subbuffer<[u8]>, u64)) -> (&'r Subbuffer<[u8]>, u64) {
    substitutes.iter().find(|(k, _)| *k == h).map_or((buffer, h), |&(_, s)| (s, handle(s)))
}

/// A command buffer being recorded, from the context's allocator.
fn command_buffer(
    level: CommandBufferLevel,
    usage: CommandBufferUsage,
    inheritance_info: Option<CommandBufferInheritanceInfo>,
) -> Result<RecordingCommandBuffer> {
    let c = ctx()?;
    let begin = CommandBufferBeginInfo { usage, inheritance_info, ..Default::default() };
    RecordingCommandBuffer::new(c.command_buffers.clone(), c.queue.queue_family_index(), level, begin)
        .map_err(|e| Error::vulkan("starting a command buffer", e))
}

/// Records `commands` once into a secondary command buffer that many submissions may execute
/// (a compiled program's: capture.rs), with its own barriers; the GPU thread calls this at the
/// program's first replay (it may wait there for pipelines still being built).
/// With `trailing_barrier` it ends with a full barrier (a device loop's iteration, executed
/// several times in a row: loops.rs).
pub fn record_secondary(commands: &[Command], trailing_barrier: bool) -> Result<CommandBuffer> {
    let mut cb = command_buffer(
        CommandBufferLevel::Secondary,
        CommandBufferUsage::SimultaneousUse,
        Some(CommandBufferInheritanceInfo::default()),
    )?;
    let (mut hazards, mut bound) = (Hazards::default(), vk::Pipeline::null());
    for command in commands {
        unsafe { record_into(&mut cb, &mut hazards, &mut bound, command)? };
    }
    if trailing_barrier {
        unsafe { cb.pipeline_barrier_unchecked(&all_memory_barrier(false)) };
    }
    unsafe { cb.end() }.map_err(|e| Error::vulkan("ending a program's command buffer", e))
}

/// A program's replay in the open batch: the inputs copied into its placeholders, its command
/// buffer, its outputs copied out, with a full barrier on each side of the program (which has
/// barriers of its own inside).
unsafe fn record_replay(batch: &mut OpenBatch, replay: &Replay) -> Result<()> {
    let program = &replay.program;
    let secondary = program.secondary()?;
    let fns = ctx()?.device.fns();
    unsafe {
        let inputs: SmallVec<[_; 8]> = replay.inputs.iter().zip(program.placeholders()).collect();
        record_copies(batch, &inputs)?;
        batch.cb.pipeline_barrier_unchecked(&all_memory_barrier(false));
        (fns.v1_0.cmd_execute_commands)(batch.cb.handle(), 1, &secondary.handle());
        batch.cb.pipeline_barrier_unchecked(&all_memory_barrier(false));
        batch.hazards.clear();
        stats().barriers.fetch_add(2, Ordering::Relaxed);
        // The primary's bound pipeline is undefined after vkCmdExecuteCommands.
        batch.bound_pipeline = vk::Pipeline::null();
        let outputs: SmallVec<[_; 8]> = program.outputs().iter().zip(&replay.outputs).collect();
        record_copies(batch, &outputs)?;
    }
    Ok(())
}

/// Whole-buffer copies (source, destination; as many bytes as the smaller holds), recorded into
/// the open batch (see copy_commands).
unsafe fn record_copies(batch: &mut OpenBatch, pairs: &[(&Subbuffer<[u8]>, &Subbuffer<[u8]>)]) -> Result<()> {
    copy_commands(pairs, None, |copy| unsafe {
        record_into(&mut batch.cb, &mut batch.hazards, &mut batch.bound_pipeline, &copy)
    })
}

/// Whole-buffer copies (source, destination; as many bytes as the smaller holds) as dispatches
/// of copy_multi.comp, 8 pairs each: on the H200 a vkCmdCopyBuffer per buffer cost the MNIST
/// step's replay ~30 us of GPU time for 11 small copies, where one dispatch's copies overlap.
/// A pair the kernel cannot bind (not whole 16-byte vectors, past the binding range) is a plain
/// buffer copy. With a `gate` (a u32), the dispatches copy nothing while it is 0 (a device
/// loop's state update), and a pair the kernel cannot bind is an error. Each command goes to
/// `emit` as it is made (a replay records them at once: no list on its path).
pub fn copy_commands(
    pairs: &[(&Subbuffer<[u8]>, &Subbuffer<[u8]>)],
    gate: Option<&Subbuffer<[u8]>>,
    mut emit: impl FnMut(Command) -> Result<()>,
) -> Result<()> {
    let range = ctx()?.info.max_storage_buffer_range;
    let bytes = |(src, dst): &(&Subbuffer<[u8]>, &Subbuffer<[u8]>)| src.size().min(dst.size());
    let (vectors, plain): (SmallVec<[_; 8]>, SmallVec<[_; 8]>) =
        pairs.iter().partition(|p| bytes(p) % 16 == 0 && bytes(p) > 0 && bytes(p) <= range);
    for pair in plain.into_iter().filter(|p| bytes(p) > 0) {
        if gate.is_some() {
            return Err(crate::error::unsupported!(
                "a device loop's state tensor of {} bytes (past one binding's {range})",
                bytes(pair)
            ));
        }
        emit(Command::Copy { src: pair.0.clone(), dst: pair.1.clone(), bytes: bytes(pair) })?;
    }
    if vectors.is_empty() {
        return Ok(());
    }
    let (kernel, name) = match gate {
        Some(_) => (crate::shaders::copy_multi_gated, "copy_multi_gated"),
        None => (crate::shaders::copy_multi, "copy_multi"),
    };
    let pipeline = crate::pipelines::pipeline(kernel, 0)?;
    for chunk in vectors.chunks(COPY_PAIRS) {
        let mut push = [0u32; PUSH_WORDS];
        let mut units = 0u64;
        for (p, pair) in chunk.iter().enumerate() {
            let n = bytes(pair) / 16;
            push[p] = u32::try_from(n).map_err(|_| Error::Vulkan("a program copy of 2^36 bytes or more".into()))?;
            units = units.max(n);
        }
        // Unused pairs bind the first pair's buffers (size 0: never touched).
        let slot = |p: usize| chunk.get(p).unwrap_or(&chunk[0]);
        let mut bindings: SmallVec<[Subbuffer<[u8]>; 4]> = gate.into_iter().cloned().collect();
        bindings.extend((0..COPY_PAIRS).map(|p| slot(p).0.clone()));
        bindings.extend((0..COPY_PAIRS).map(|p| slot(p).1.clone()));
        let groups = crate::ops::elementwise_groups(units);
        emit(Command::Dispatch(Dispatch::new(name, pipeline, bindings, push, groups, COPY_PAIRS)))?;
    }
    Ok(())
}

/// Copy pairs one copy_multi.comp dispatch takes.
const COPY_PAIRS: usize = 8;

/// The copy dispatches a pre-recorded replay spends on `buffers` arguments (or results).
pub fn copy_dispatches(buffers: usize) -> usize {
    buffers.div_ceil(COPY_PAIRS)
}

impl Recorder {
    /// Runs `f`, turning a panic into an error; the first error is kept for the next flush.
    fn guarded(&mut self, f: impl FnOnce(&mut Self) -> Result<()>) {
        let result = catch_unwind(AssertUnwindSafe(|| f(self)))
            .unwrap_or_else(|_| Err(Error::Vulkan("recording or submitting panicked".into())));
        if let Err(e) = result {
            // The open batch may be half recorded: drop it (its commands are lost, and the
            // error says so at the next flush). Its hazards held the queue's, and any barrier
            // it recorded will not run: the next command gets a barrier.
            self.open = None;
            self.carried_hazards.lose_track();
            self.error.get_or_insert(e);
        }
    }

    /// Records every pending command into the open command buffer, up to REORDER_WINDOW at a
    /// time in dependency order (`by_level`), submitting it (and waiting) each time it reaches
    /// the cap. Unless `last` (a flush, backpressure, a change of GPU timing: everything queued
    /// must be recorded), the commands at the end whose window-fusion chain may still go on stay
    /// with the recorder (`held`) and open the next drain's window (see `WindowFuser::plan`).
    fn drain(&mut self, pending: &Pending, last: bool) {
        // A swap, not a store: it reads the latest request, so every command sent before a
        // caller found the flag set is taken below.
        queue().drain_requested.swap(false, Ordering::AcqRel);
        // Taken in whole lists (the commands pushed since the last take), recorded in windows of
        // REORDER_WINDOW in arrival order, until a take finds nothing.
        let mut taken = std::mem::take(&mut self.taken);
        let mut window = std::mem::take(&mut self.held);
        loop {
            pending.take(&mut taken);
            if taken.is_empty() {
                break;
            }
            self.taken_commands += taken.len();
            let mut commands = taken.drain(..);
            loop {
                window.extend(commands.by_ref().take(REORDER_WINDOW - window.len()));
                // A window not full waits for the next take, or the end.
                if window.len() < REORDER_WINDOW {
                    break;
                }
                self.record_window(&mut window, false);
            }
        }
        if !window.is_empty() {
            self.record_window(&mut window, last);
        }
        // Emptied, their capacity kept for the next swap.
        self.taken = taken;
        self.held = window;
    }

    /// Records `window`'s commands, with window fusion's kernels in place of the chains it has
    /// built and in dependency order, except those window fusion holds for the next window
    /// (none with `last`), which stay in `window`.
    fn record_window(&mut self, window: &mut Vec<Queued>, last: bool) {
        let mut held = Vec::new();
        if window.len() > 1 || !last {
            // Counted as recording time (what `stats/0`'s record_ns reports per command).
            let started = Instant::now();
            held = self.fuse_window(window, last);
            if *REORDER && window.len() > 1 {
                by_level(window, self.open.as_ref().map_or(&self.carried_hazards, |b| &b.hazards));
            }
            if let Some(batch) = self.open.as_mut() {
                batch.recording_ns += started.elapsed().as_nanos() as u64;
            }
        }
        for command in window.drain(..) {
            self.record_and_submit(command);
        }
        window.append(&mut held);
    }

    /// Puts the fused kernels of the chains in `window` whose kernels are built in their members'
    /// places (window_fuse.rs). A fused command takes the first member it replaces as its queue
    /// entry, and the others it replaces ride on it (kept and retired with it). Returns the
    /// commands at the window's end that wait for the next window (`WindowFuser::plan`).
    fn fuse_window(&mut self, window: &mut Vec<Queued>, last: bool) -> Vec<Queued> {
        // Off (the default): nothing to look at in the window.
        if crate::window_fuse::AFTER.load(Ordering::Relaxed) == 0 {
            return Vec::new();
        }
        let (plan, known) = {
            let commands: SmallVec<[&Command; REORDER_WINDOW]> = window.iter().map(|q| &q.command).collect();
            self.fuser.plan(&commands, last)
        };
        let held = window.split_off(known);
        if plan.is_empty() {
            return held;
        }
        let mut old: SmallVec<[Option<Queued>; REORDER_WINDOW]> = window.drain(..).map(Some).collect();
        // Each chain's commands go where its last member was (window_fuse.rs `chain_at`).
        let mut chain_ending_at: SmallVec<[Option<usize>; REORDER_WINDOW]> = SmallVec::from_elem(None, old.len());
        for (c, (members, _)) in plan.iter().enumerate() {
            chain_ending_at[members[members.len() - 1]] = Some(c);
        }
        let take = |old: &mut [Option<Queued>], k: usize| old[k].take().expect("each command is placed once");
        for at in 0..old.len() {
            let Some(c) = chain_ending_at[at] else {
                // A chain's earlier member is taken already (placed with the chain).
                if old[at].is_some() && !plan.iter().any(|(m, _)| m.contains(&at)) {
                    window.push(take(&mut old, at));
                }
                continue;
            };
            let (members, template) = &plan[c];
            let placed = {
                let commands: SmallVec<[&Command; MAX_CHAIN]> =
                    members.iter().map(|&k| &old[k].as_ref().expect("not placed yet").command).collect();
                template.instantiate(&commands)
            };
            // The members no kept command is: their entries carry the fused commands, in order,
            // and the rest ride on the first of them.
            let mut replaced: SmallVec<[Queued; MAX_CHAIN]> = (0..members.len())
                .filter(|k| !placed.iter().any(|p| matches!(p, Placed::Member(m) if m == k)))
                .map(|k| take(&mut old, members[k]))
                .collect();
            replaced.reverse();
            let mut carrier = None;
            for part in placed {
                match part {
                    Placed::Member(k) => window.push(take(&mut old, members[k])),
                    Placed::Fused(command) => {
                        let mut entry = replaced.pop().expect("a fused command replaces two members or more");
                        entry.command = command;
                        carrier.get_or_insert(window.len());
                        window.push(entry);
                    }
                }
            }
            if let Some(at) = carrier {
                window[at].riders.extend(replaced.into_iter().rev());
            }
            let stats = stats();
            stats.window_replaced.fetch_add(template.replaced() as u64, Ordering::Relaxed);
            stats.window_kernels.fetch_add(template.kernels() as u64, Ordering::Relaxed);
        }
        held
    }

    /// Records one command, then submits the open command buffer if the cap, a program or early
    /// submission asks.
    fn record_and_submit(&mut self, command: Queued) {
        let program = matches!(command.command, Command::Program(_));
        self.guarded(|r| r.record(command));
        let full = self.open.as_ref().is_some_and(|b| {
            b.commands.len() >= batch_max() || (b.timestamps.is_some() && b.commands.len() >= TIMED_COMMANDS)
        });
        if full {
            stats().flushes[FlushReason::BatchCap as usize].fetch_add(1, Ordering::Relaxed);
            self.guarded(|r| r.submit(false, "batch_cap"));
        } else if program && SUBMIT_PROGRAMS.load(Ordering::Relaxed) {
            self.guarded(|r| r.submit(false, "program"));
        } else {
            // Checked after every command, as the cap is: a drain that finds many commands
            // pending sends the first SUBMIT_COMMANDS on while it records the rest (checked
            // once at the end, its batch grew past them; H100, one call: the seed's MNIST step
            // 0.46-0.51 ms that way against 0.32 at cap 16).
            self.submit_if_due(false);
        }
    }

    /// Whether the open command buffer is due to go to the GPU before a flush or the cap asks:
    /// its commands write SUBMIT_BYTES or more, or it holds SUBMIT_COMMANDS commands or more, or
    /// SUBMIT_IDLE or more while nothing is in flight (submissions already done retired first).
    fn due(&mut self) -> Option<&'static str> {
        let (bytes, commands) = (SUBMIT_BYTES.load(Ordering::Relaxed), SUBMIT_COMMANDS.load(Ordering::Relaxed));
        let idle = SUBMIT_IDLE.load(Ordering::Relaxed);
        let (written, held) = self.open.as_ref().map(|b| (b.written_bytes, b.commands.len()))?;
        if bytes > 0 && written >= bytes {
            Some("work")
        } else if commands > 0 && held >= commands {
            Some("commands")
        } else if idle > 0 && held >= idle && self.gpu_idle() {
            Some("idle")
        } else {
            None
        }
    }

    /// Whether the GPU has nothing to run while callers have queued commands the thread has not
    /// taken. The callers' count is read only once the GPU is idle: reading it takes its cache
    /// line from the caller's core, which the caller's next command takes back.
    fn idle_with_pending(&mut self) -> bool {
        self.gpu_idle() && queue().sent.commands.load(Ordering::Relaxed) > self.taken_commands
    }

    /// Whether no submission is on the GPU, after retiring those whose fence has signalled.
    fn gpu_idle(&mut self) -> bool {
        while self.in_flight.front().is_some_and(|f| f.fence.is_signaled().unwrap_or(true)) {
            self.guarded(|r| r.retire_oldest(spin_budget()));
        }
        self.in_flight.is_empty()
    }

    /// Early submission (SUBMIT_BYTES, SUBMIT_COMMANDS, SUBMIT_IDLE): submits a due open command
    /// buffer once the GPU has room for it (retiring submissions already done, without waiting),
    /// or with `force` whatever it takes (the thread is about to block, so nobody would submit it
    /// until the next flush).
    fn submit_if_due(&mut self, force: bool) {
        let Some(reason) = self.due() else {
            return;
        };
        self.gpu_idle();
        if force || self.in_flight.len() < MAX_IN_FLIGHT {
            stats().early_submissions.fetch_add(1, Ordering::Relaxed);
            self.guarded(|r| r.submit(false, reason));
        }
    }

    fn begin(&mut self) -> Result<OpenBatch> {
        let started = Instant::now();
        let mut cb = command_buffer(CommandBufferLevel::Primary, CommandBufferUsage::OneTimeSubmit, None)?;
        let mode = timing_mode();
        let timestamps = if mode.is_some() {
            let pool = self.timestamp_pool()?;
            unsafe {
                cb.reset_query_pool_unchecked(&pool, 0..TIMED_COMMANDS as u32 + 1);
                cb.write_timestamp_unchecked(&pool, 0, PipelineStage::TopOfPipe);
            }
            Some(pool)
        } else {
            None
        };
        let opened_ns = started.elapsed().as_nanos() as u64;
        stats().record_begin_ns.fetch_add(opened_ns, Ordering::Relaxed);
        Ok(OpenBatch {
            cb,
            sealed: Vec::new(),
            segment_start: 0,
            commands: Vec::with_capacity(batch_max().min(1024)),
            hazards: std::mem::take(&mut self.carried_hazards),
            timestamps,
            per_command: mode.unwrap_or(false),
            recording_ns: opened_ns,
            written_bytes: 0,
            bound_pipeline: vk::Pipeline::null(),
        })
    }

    /// The open command buffer, begun if there is none.
    fn batch(&mut self) -> Result<&mut OpenBatch> {
        if self.open.is_none() {
            self.open = Some(self.begin()?);
        }
        Ok(self.open.as_mut().unwrap())
    }

    fn record(&mut self, queued: Queued) -> Result<()> {
        // `Nx.Vulkan.set_gpu_timing/1` applies from the next command recorded: a batch opened
        // under another setting goes to the GPU first (else commands queued after timing was
        // turned on could land untimed in a batch opened before).
        if let Some(batch) = &self.open {
            if batch.timestamps.as_ref().map(|_| batch.per_command) != timing_mode() {
                self.submit(false, "gpu_timing")?;
            }
        }
        let started = Instant::now();
        // A loop submits and waits mid-way: its time is not recording time.
        let mut waited = Duration::ZERO;
        match &queued.command {
            Command::Program(replay) if replay.program.prerecorded() => unsafe { record_replay(self.batch()?, replay)? },
            Command::Program(replay) => waited = self.record_direct(replay)?,
            Command::Loop(run) => waited = self.run_loop(run)?,
            command => {
                let batch = self.batch()?;
                unsafe { record_into(&mut batch.cb, &mut batch.hazards, &mut batch.bound_pipeline, command)? }
            }
        }
        // The command stays with the last command buffer it recorded into, which completes last.
        let batch = self.batch()?;
        batch.written_bytes += queued.bytes + queued.riders.iter().map(|r| r.bytes).sum::<u64>();
        batch.commands.push(queued);
        if let Some(pool) = batch.timestamps.as_ref().filter(|_| batch.per_command) {
            // After command i (1-based): its end, and the next one's start.
            unsafe { batch.cb.write_timestamp_unchecked(pool, batch.commands.len() as u32, PipelineStage::BottomOfPipe) };
        }
        if batch.commands.len() - batch.segment_start >= SEGMENT_COMMANDS {
            batch.seal_segment()?;
        }
        batch.recording_ns += started.elapsed().saturating_sub(waited).as_nanos() as u64;
        Ok(())
    }

    /// A program's replay recorded afresh (a program that is not pre-recorded): its commands
    /// with the caller's inputs and the fresh outputs bound in place of the placeholders and the
    /// captured outputs, through the open batch's hazard tracking (the barriers a replay queued
    /// command by command would get, at no channel, queue-entry or copy cost per command).
    /// Returns the time its device loops spent submitting and waiting.
    fn record_direct(&mut self, replay: &Replay) -> Result<Duration> {
        let substitutes = replay.program.substitutes(replay);
        let mut waited = Duration::ZERO;
        for command in &replay.program.commands {
            match command {
                Command::Dispatch(d) => {
                    let batch = self.batch()?;
                    let bindings: SmallVec<[_; 4]> = d.bound().map(|b| substitute_bound(&substitutes, b)).collect();
                    unsafe {
                        record_dispatch_tracked(&mut batch.cb, &mut batch.hazards, &mut batch.bound_pipeline, d, &bindings)?
                    };
                }
                Command::Copy { .. } => {
                    let batch = self.batch()?;
                    let copy = command.with_buffers(|b| substitute(&substitutes, b).clone());
                    unsafe { record_into(&mut batch.cb, &mut batch.hazards, &mut batch.bound_pipeline, &copy)? };
                }
                Command::Loop(run) => waited += self.run_loop(&run.with_buffers(|b| substitute(&substitutes, b).clone()))?,
                Command::Program(_) => return Err(Error::Vulkan("a program inside a program".into())),
            }
        }
        Ok(waited)
    }

    /// A device loop (loops.rs): its initial state copied in, then chunks of iterations, each
    /// submitted and waited for, its last condition read from the host-visible copy, until a
    /// chunk ends with the condition false; the state copied out into the command's outputs in
    /// the open command buffer. Returns the time spent submitting and waiting.
    fn run_loop(&mut self, run: &LoopRun) -> Result<Duration> {
        let l = &run.looped;
        if let Some(body) = &l.nested {
            return self.run_nested_loop(run, body);
        }
        let (step, check) = (l.step()?, l.check()?);
        let fns = ctx()?.device.fns();
        let initial: SmallVec<[_; 8]> = run.initial.iter().zip(l.copied()).collect();
        let batch = self.batch()?;
        unsafe {
            batch.cb.pipeline_barrier_unchecked(&all_memory_barrier(false));
            batch.hazards.clear();
            record_copies(batch, &initial)?;
        }
        let mut waited = Duration::ZERO;
        let mut chunk = 1usize;
        loop {
            let batch = self.batch()?;
            let steps: SmallVec<[vk::CommandBuffer; 16]> = std::iter::repeat_n(step.handle(), chunk).collect();
            unsafe {
                batch.cb.pipeline_barrier_unchecked(&all_memory_barrier(false));
                (fns.v1_0.cmd_execute_commands)(batch.cb.handle(), chunk as u32, steps.as_ptr());
                (fns.v1_0.cmd_execute_commands)(batch.cb.handle(), 1, &check.handle());
                let flag = CopyBufferInfo::buffers(l.flag.clone().slice(..4), l.staging.clone().slice(..4));
                batch.cb.copy_buffer_unchecked(&flag);
            }
            // What the iterations and the condition wrote is not in the sets: the next command
            // (the next chunk's barrier aside) waits for all of it.
            batch.hazards.lose_track();
            // The primary's bound pipeline is undefined after vkCmdExecuteCommands.
            batch.bound_pipeline = vk::Pipeline::null();
            stats().barriers.fetch_add(chunk as u64 + 2, Ordering::Relaxed);
            let started = Instant::now();
            self.submit(true, "loop")?;
            let took = started.elapsed();
            waited += took;
            stats().loop_chunks.fetch_add(1, Ordering::Relaxed);
            stats().loop_iterations.fetch_add(chunk as u64, Ordering::Relaxed);
            let guard = l.staging.read().map_err(|e| Error::vulkan("mapping a device loop's condition", e))?;
            let go = u32::from_ne_bytes([guard[0], guard[1], guard[2], guard[3]]) != 0;
            drop(guard);
            if !go {
                break;
            }
            chunk = if took < crate::loops::CHUNK_TARGET {
                (chunk * 2).min(crate::loops::MAX_CHUNK)
            } else {
                (chunk / 2).max(1)
            };
        }
        let outputs: SmallVec<[_; 8]> = l.copied().zip(&run.outputs).collect();
        let batch = self.batch()?;
        unsafe { record_copies(batch, &outputs)? };
        Ok(waited)
    }

    /// A device loop whose body runs device loops (loops.rs, `nested`): per iteration the
    /// condition alone, submitted and read; if true, the body's commands recorded in order (its
    /// loops run in turn) with the state update. Returns the time spent submitting and waiting.
    fn run_nested_loop(&mut self, run: &LoopRun, body: &[Command]) -> Result<Duration> {
        let l = &run.looped;
        let check = l.check()?;
        let fns = ctx()?.device.fns();
        let initial: SmallVec<[_; 8]> = run.initial.iter().zip(l.copied()).collect();
        unsafe { record_copies(self.batch()?, &initial)? };
        let mut waited = Duration::ZERO;
        loop {
            let batch = self.batch()?;
            unsafe {
                batch.cb.pipeline_barrier_unchecked(&all_memory_barrier(false));
                (fns.v1_0.cmd_execute_commands)(batch.cb.handle(), 1, &check.handle());
                let flag = CopyBufferInfo::buffers(l.flag.clone().slice(..4), l.staging.clone().slice(..4));
                batch.cb.copy_buffer_unchecked(&flag);
            }
            batch.hazards.lose_track();
            batch.bound_pipeline = vk::Pipeline::null();
            stats().barriers.fetch_add(2, Ordering::Relaxed);
            let started = Instant::now();
            self.submit(true, "loop")?;
            waited += started.elapsed();
            stats().loop_chunks.fetch_add(1, Ordering::Relaxed);
            let guard = l.staging.read().map_err(|e| Error::vulkan("mapping a device loop's condition", e))?;
            let go = u32::from_ne_bytes([guard[0], guard[1], guard[2], guard[3]]) != 0;
            drop(guard);
            if !go {
                break;
            }
            stats().loop_iterations.fetch_add(1, Ordering::Relaxed);
            for command in body {
                match command {
                    Command::Loop(inner) => waited += self.run_loop(inner)?,
                    command => {
                        let batch = self.batch()?;
                        unsafe { record_into(&mut batch.cb, &mut batch.hazards, &mut batch.bound_pipeline, command)? }
                    }
                }
            }
        }
        let outputs: SmallVec<[_; 8]> = l.copied().zip(&run.outputs).collect();
        unsafe { record_copies(self.batch()?, &outputs)? };
        Ok(waited)
    }

    /// Ends and submits the open command buffer, if any, keeping at most MAX_IN_FLIGHT
    /// submissions on the GPU; with `wait`, waits until everything submitted is done. `reason`
    /// names what submitted it, for the telemetry event.
    fn submit(&mut self, wait: bool, reason: &'static str) -> Result<()> {
        if let Some(mut batch) = self.open.take() {
            let c = ctx()?;
            let started = Instant::now();
            self.carried_hazards = std::mem::take(&mut batch.hazards);
            unsafe {
                if let Some(pool) = batch.timestamps.as_ref().filter(|_| !batch.per_command) {
                    batch.cb.write_timestamp_unchecked(pool, 1, PipelineStage::BottomOfPipe);
                }
                // Make every write visible to the host (downloads read staging buffers after the fence).
                batch.cb.pipeline_barrier_unchecked(&all_memory_barrier(true));
            }
            let cb: CommandBuffer =
                unsafe { batch.cb.end() }.map_err(|e| Error::vulkan("ending a command buffer", e))?;
            stats().recorded.fetch_add(batch.commands.iter().map(|q| q.command.recorded()).sum(), Ordering::Relaxed);
            stats().record_ns.fetch_add(batch.recording_ns, Ordering::Relaxed);
            while self.in_flight.len() >= MAX_IN_FLIGHT {
                self.retire_oldest(spin_budget())?;
            }
            let fence = self.fence()?;
            // The sealed segments first, then the last: submission order is recording order.
            let cb_handles: SmallVec<[vk::CommandBuffer; 4]> =
                batch.sealed.iter().chain([&cb]).map(|cb| cb.handle()).collect();
            let submit = vk::SubmitInfo::default().command_buffers(&cb_handles);
            let status = c.queue.with(|_guard| unsafe {
                (c.device.fns().v1_0.queue_submit)(c.queue.handle(), 1, &submit, fence.handle())
            });
            if status != vk::Result::SUCCESS {
                self.free_fences.push(fence);
                return Err(Error::Vulkan(format!("vkQueueSubmit failed: {status:?}")));
            }
            stats().submissions.fetch_add(1, Ordering::Relaxed);
            stats().command_buffers.fetch_add(cb_handles.len() as u64, Ordering::Relaxed);
            let submitted = Instant::now();
            let submit_ns = (submitted - started).as_nanos() as u64;
            stats().submit_ns.fetch_add(submit_ns, Ordering::Relaxed);
            crate::events::submit(reason, batch.commands.len(), (batch.recording_ns + submit_ns) / 1000);
            self.in_flight.push_back(InFlight {
                fence,
                _cb: cb,
                _sealed: batch.sealed,
                commands: batch.commands,
                timestamps: batch.timestamps,
                per_command: batch.per_command,
                submitted,
            });
        }
        if wait {
            while !self.in_flight.is_empty() {
                self.retire_oldest(flush_spin_budget())?;
            }
        }
        Ok(())
    }

    /// Waits until every submission on the GPU has completed (polling each fence for up to
    /// `budget` first, as retire_oldest does), releasing nothing: retire_oldest then finds them
    /// signalled.
    fn settle(&mut self, budget: Duration) -> Result<()> {
        let waiting = Instant::now();
        for submission in &self.in_flight {
            await_fence(&submission.fence, budget)?;
        }
        stats().wait_ns.fetch_add(waiting.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Waits for the oldest submission (polling for up to `budget` first: a blocking wait costs
    /// ~25 us more than polling on real GPUs), then releases what it used.
    fn retire_oldest(&mut self, budget: Duration) -> Result<()> {
        let Some(done) = self.in_flight.pop_front() else { return Ok(()) };
        let c = ctx()?;
        let waiting = Instant::now();
        await_fence(&done.fence, budget)?;
        stats()
            .wait_ns
            .fetch_add(waiting.elapsed().as_nanos() as u64, Ordering::Relaxed);
        unsafe { done.fence.reset() }.map_err(|e| Error::vulkan("resetting a fence", e))?;
        if let Some(pool) = &done.timestamps {
            let n = if done.per_command { done.commands.len() } else { 1 };
            let mut ticks = vec![0u64; n + 1];
            pool.get_results(0..n as u32 + 1, &mut ticks, QueryResultFlags::WAIT)
                .map_err(|e| Error::vulkan("reading timestamps", e))?;
            let ns = |a: u64, b: u64| (b.saturating_sub(a) as f64 * c.info.timestamp_period as f64) as u64;
            stats().gpu_ns.fetch_add(ns(ticks[0], ticks[n]), Ordering::Relaxed);
            if let Some(mut times) = KERNEL_TIMES.lock().ok().filter(|_| done.per_command) {
                for (i, command) in done.commands.iter().enumerate() {
                    let name = command.command.kernel_name();
                    let entry = times.entry(name).or_default();
                    entry.0 += 1;
                    entry.1 += ns(ticks[i], ticks[i + 1]);
                }
            }
            self.free_timestamps.push(pool.clone());
        }
        let _ = done.submitted;
        self.free_fences.push(done.fence.clone());
        // Dropping the commands now, after the fence, releases the buffers they kept alive.
        drop(done.commands);
        Ok(())
    }

    fn fence(&mut self) -> Result<Arc<Fence>> {
        if let Some(fence) = self.free_fences.pop() {
            return Ok(fence);
        }
        let fence = Fence::new(ctx()?.device.clone(), FenceCreateInfo::default())
            .map_err(|e| Error::vulkan("creating a fence", e))?;
        Ok(Arc::new(fence))
    }

    fn timestamp_pool(&mut self) -> Result<Arc<QueryPool>> {
        if let Some(pool) = self.free_timestamps.pop() {
            return Ok(pool);
        }
        QueryPool::new(
            ctx()?.device.clone(),
            QueryPoolCreateInfo {
                query_count: TIMED_COMMANDS as u32 + 1,
                ..QueryPoolCreateInfo::query_type(QueryType::Timestamp)
            },
        )
        .map_err(|e| Error::vulkan("creating timestamp queries", e))
    }
}
