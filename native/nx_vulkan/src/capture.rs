//! Programs: a defn function's commands captured once and replayed (the compiler,
//! lib/nx_vulkan/compiler.ex).
//!
//! The compiler runs a function once under `Nx.Defn.Evaluator` on placeholder inputs while the
//! calling process captures: every command its op NIFs describe goes into the capture instead
//! of the pending queue, and every buffer those commands use is held. The commands themselves
//! are the program: the ops decide kernels, push constants and groups exactly as they do
//! eagerly, so a replay computes bit for bit what the Evaluator computes on this device.
//!
//! A replay (`program_run`) is one NIF call: it queues the program's commands with the buffers
//! that stand in for the capture's (the caller's tensors for the placeholders, fresh buffers for
//! the outputs). Intermediates stay the program's own, reused by every replay (the recorder's
//! hazard tracking orders one replay's writes after the previous one's reads).
//!
//! A capture gives up (the compiler then runs that function under the Evaluator, counted with
//! the reason) when the function needs the host mid-work (a download, the host fallback, a
//! deferred check) or writes a buffer made outside it; nothing captured ever runs then.
//!
//! Which process is capturing: op NIFs start with `scope(env)`, which looks the calling process
//! up (only while some capture is active) and sets a thread-local for the rest of the call.
use crate::error::{Error, Result};
use crate::queue::{self, handle, Command, Replay};
use crate::tensor::{self, BufferRef};
use once_cell::sync::Lazy;
use rustler::{Encoder, Env, LocalPid, ResourceArc, Term};
use smallvec::SmallVec;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use vulkano::buffer::Subbuffer;
use vulkano::command_buffer::CommandBuffer;

/// NXV_PRERECORD (read once): `0`, every replay records its commands again with the caller's
/// buffers; `1`, every program is pre-recorded (copies around it); otherwise by size (for
/// measuring one against the other).
static PRERECORD: Lazy<Option<bool>> = Lazy::new(|| crate::policy::env_switch("NXV_PRERECORD"));

/// Whether a program of `commands` is pre-recorded rather than recorded again at every replay,
/// when NXV_PRERECORD does not say. A pre-recorded replay copies its `inputs` arguments in and
/// its `outputs` results out (queue::record_copies: a dispatch per 8 buffers each way); one
/// recorded again costs the GPU thread every command's recording first. GPUs: pre-recorded past
/// twice as many commands as copy dispatches (H200, MNIST step, 23 commands: vkCmdDispatch alone
/// took 1.3-1.6 us to record, the replay's recording 65-70 us a step against 15 pre-recorded),
/// and while the copies move at most COPY_BYTES_PER_COMMAND per command: copying large arguments
/// at every call costs more than recording (64 MiB read and written is ~40 us at the H200's
/// ~3.5 TB/s, some 20 dispatches' recording). CPU devices: past twice as many commands as buffers
/// copied (lavapipe's MNIST step, 17 commands and 11 buffers, measured 6.9-11.3 ms a step
/// recorded again, 12.2-15.1 pre-recorded).
fn worth_prerecording(commands: usize, inputs: &[(u64, u64)], outputs: &[(u64, u64)]) -> bool {
    if crate::policy::cpu_device() {
        commands > 2 * (inputs.len() + outputs.len())
    } else {
        let copied: u64 = inputs.iter().chain(outputs).map(|&(_, bytes)| bytes).sum();
        commands > 2 * (queue::copy_dispatches(inputs.len()) + queue::copy_dispatches(outputs.len()))
            && copied <= commands as u64 * COPY_BYTES_PER_COMMAND
    }
}

/// Bytes a pre-recorded replay may copy per command it saves recording (GPUs): ~4 MiB moves in
/// about the 2 us a dispatch takes to record on the H200.
const COPY_BYTES_PER_COMMAND: u64 = 4 << 20;

/// Captures in progress, in any process: while zero, `scope` and the hooks cost one load.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
static CAPTURES: Lazy<Mutex<Vec<(LocalPid, Arc<Capture>)>>> = Lazy::new(Default::default);

thread_local! {
    /// The capture of the process whose NIF runs on this thread now, if it captures.
    static CURRENT: RefCell<Option<Arc<Capture>>> = const { RefCell::new(None) };
    /// Whether a NIF running on this thread opened a scope (a recording NIF without one, while a
    /// capture is active, could belong to the capturing process: every capture then gives up).
    static IN_SCOPE: Cell<bool> = const { Cell::new(false) };
}

/// Marks a NIF call as belonging to its calling process's capture, if any, until dropped.
pub struct Scope(());

pub fn scope(env: Env) -> Scope {
    IN_SCOPE.with(|s| s.set(true));
    if ACTIVE.load(Ordering::Acquire) != 0 {
        let pid = env.pid();
        let found = CAPTURES.lock().ok().and_then(|list| list.iter().find(|(p, _)| *p == pid).map(|(_, c)| c.clone()));
        CURRENT.with(|c| *c.borrow_mut() = found);
    }
    Scope(())
}

impl Drop for Scope {
    fn drop(&mut self) {
        IN_SCOPE.with(|s| s.set(false));
        CURRENT.with(|c| c.borrow_mut().take());
    }
}

/// The calling process's capture (None on the fast path, when nothing captures).
fn current() -> Option<Arc<Capture>> {
    if ACTIVE.load(Ordering::Acquire) == 0 {
        return None;
    }
    if !IN_SCOPE.with(|s| s.get()) {
        give_up_all("a NIF without a capture scope queued work or allocated while a program was being recorded");
        return None;
    }
    CURRENT.with(|c| c.borrow().clone())
}

fn give_up_all(reason: &str) {
    if let Ok(list) = CAPTURES.lock() {
        for (_, capture) in list.iter() {
            capture.give_up(reason);
        }
    }
}

/// A buffer a capture or a program uses: deallocation leaves it alone while held.
pub struct Held(BufferRef);

impl Held {
    fn new(buffer: &BufferRef) -> Self {
        buffer.held.fetch_add(1, Ordering::AcqRel);
        Held(buffer.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, Ordering::AcqRel);
    }
}

#[derive(Default)]
struct State {
    commands: Vec<Command>,
    /// Every tensor buffer a command used or the capture allocated, once (by handle).
    held: HashMap<u64, Held>,
    /// Handles of the buffers allocated while capturing.
    allocated: HashSet<u64>,
    /// Handles of the buffers whose contents depend on the inputs: the placeholders, and what
    /// captured commands wrote.
    derived: HashSet<u64>,
    /// Commands that depend on no input ran at once (constant folding: the constants, iotas
    /// and literals a function makes are made once, not at every replay), by the buffer they
    /// wrote; kept in case a captured command writes the same buffer later.
    folded: HashMap<u64, Vec<Command>>,
    /// Bytes of the buffers allocated while capturing (a program keeps them all).
    allocated_bytes: u64,
    /// Deferred checks made while capturing (templates, checks.rs) and the buffers their
    /// private copies of the condition's scalar went to, in order.
    checks: Vec<(Arc<crate::checks::Check>, BufferRef)>,
    gave_up: Option<String>,
}

pub struct Capture {
    state: Mutex<State>,
    /// The device the program runs on: an op on another gives the capture up.
    device: usize,
    /// A device loop's condition or body (compiler.ex capture_device_loop): the program keeps its
    /// small stages unmerged for the loop to merge (`Program::stages`).
    for_loop: bool,
}

impl Capture {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means a panic mid-update; the capture is then abandoned anyway.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn give_up(&self, reason: &str) {
        self.state().gave_up.get_or_insert_with(|| reason.to_string());
    }

    fn push(&self, command: Command, uses: &[&BufferRef]) -> Result<()> {
        let mut state = self.state();
        if state.gave_up.is_some() {
            return Ok(());
        }
        if crate::context::current() != self.device {
            state.gave_up = Some("an op runs on another device than the program's".into());
            return Ok(());
        }
        // Checks made while capturing pass on as any op's do; a tensor from before the capture
        // whose checks are not settled would need them read.
        if uses.iter().any(|b| crate::checks::live(b).unwrap_or(true)) {
            state.gave_up = Some("an op reads a tensor that carries a deferred check".into());
            return Ok(());
        }
        // An op's command writes one buffer (only fused kernels, made after capture, and device
        // loops write more).
        let (reads, writes) = command.accesses();
        let looped = matches!(command, Command::Loop(_));
        let written = writes[0];
        if (writes.len() != 1 && !looped) || !writes.iter().all(|w| state.allocated.contains(w)) {
            state.gave_up = Some("an op writes a tensor made outside the function".into());
            return Ok(());
        }
        for buffer in uses {
            let h = handle(&buffer.get()?);
            state.held.entry(h).or_insert_with(|| Held::new(buffer));
        }
        if looped {
            // Always part of the program (a loop of constants runs at every replay).
            state.derived.extend(writes.iter().copied());
            state.commands.push(command);
            return Ok(());
        }
        if !state.derived.contains(&written) && !reads.iter().any(|r| state.derived.contains(r)) {
            state.folded.entry(written).or_default().push(command.clone());
            return queue::record(command);
        }
        if let Some(earlier) = state.folded.remove(&written) {
            // Part of this buffer was folded: its writes replay too, before this one. A captured
            // command that read the buffer before would read the last replay's contents.
            let read_before = state.commands.iter().any(|c| c.accesses().0.contains(&written));
            if read_before {
                state.gave_up = Some("an op reads a buffer that a later op writes".into());
                return Ok(());
            }
            state.commands.extend(earlier);
        }
        state.derived.insert(written);
        state.commands.push(command);
        Ok(())
    }
}

/// Queues `command`, or adds it to the calling process's capture. `uses` are the tensors it
/// touches (a capture holds them for as long as its program lives).
pub fn record(command: Command, uses: &[&BufferRef]) -> Result<()> {
    match current() {
        Some(capture) => capture.push(command, uses),
        None => queue::record(command),
    }
}

/// A buffer just allocated by the calling NIF: a capture's own when its process captures. A
/// program keeps every buffer its capture allocated; past a quarter of the memory budget (a long
/// loop unrolled) the capture gives up.
pub fn allocated(buffer: &BufferRef) -> Result<()> {
    if let Some(capture) = current() {
        let h = handle(&buffer.get()?);
        let mut state = capture.state();
        state.allocated.insert(h);
        state.allocated_bytes += buffer.bytes;
        state.held.entry(h).or_insert_with(|| Held::new(buffer));
        let limit = crate::memory::limit() / 4;
        if state.allocated_bytes > limit {
            let reason = format!(
                "the program would keep more than {limit} bytes of intermediates (a quarter of the memory budget)"
            );
            state.gave_up.get_or_insert(reason);
        }
    }
    Ok(())
}

/// A host read of `tensor` while capturing: fine for a value that depends on no argument (the
/// constants folded at capture, e.g. a `while` counter, so loops with a fixed trip count
/// unroll into the program); for one computed from the arguments the capture gives up and the
/// read fails (the compiler then runs the function under the Evaluator).
pub fn host_read(tensor: &BufferRef) -> Result<()> {
    let Some(capture) = current() else { return Ok(()) };
    let h = handle(&tensor.get()?);
    if !capture.state().derived.contains(&h) {
        return Ok(());
    }
    let what = "a host read of a value computed from the arguments (a while condition or cond predicate that depends on them, a host fallback)";
    capture.give_up(what);
    Err(Error::Vulkan(format!("{what} while a compiled program is being recorded")))
}

/// Whether the calling process is capturing.
pub fn capturing() -> bool {
    current().is_some()
}

/// Runs `f` with the calling thread's capture set aside, in a scope of its own: what it queues
/// goes to the device queue, not to the program (a lazy view made before the capture and copied
/// during it: the copy belongs to the view, which outlives the capture, not to its replays).
pub fn outside<T>(f: impl FnOnce() -> T) -> T {
    let saved = CURRENT.with(|c| c.borrow_mut().take());
    let in_scope = IN_SCOPE.with(|s| s.replace(true));
    let out = f();
    IN_SCOPE.with(|s| s.set(in_scope));
    CURRENT.with(|c| *c.borrow_mut() = saved);
    out
}

/// Keeps `check` (a template: attach_check while capturing) with `copy`, the buffer its
/// condition's scalar is copied to, for the program's outputs. A condition that depends on no
/// argument was computed at capture: the capture gives up on it (an eager check reads it).
pub fn add_check(check: &Arc<crate::checks::Check>, copy: &BufferRef) -> Result<()> {
    let Some(capture) = current() else { return Ok(()) };
    let h = handle(&copy.get()?);
    let derived = capture.state().derived.contains(&h);
    if !derived {
        return refuse("a deferred check of a value that depends on no argument");
    }
    capture.state().checks.push((check.clone(), copy.clone()));
    Ok(())
}

/// What a capture cannot contain (a host read mid-work): the capture gives up, and the NIF
/// fails (the compiler then runs the function under the Evaluator, where it can).
pub fn refuse(what: &str) -> Result<()> {
    match current() {
        Some(capture) => {
            capture.give_up(what);
            Err(Error::Vulkan(format!("{what} while a compiled program is being recorded")))
        }
        None => Ok(()),
    }
}

/// Gives the calling process's capture up with `reason` (what the compiler found it cannot
/// capture, e.g. a device loop's body); the NIF then fails as any refused op's does.
#[rustler::nif]
fn capture_give_up(env: Env, reason: String) -> Result<rustler::Atom> {
    let _capture = scope(env);
    refuse(&reason)?;
    Ok(atoms::ok())
}

/// A captured program: its commands (with the capture's buffers in them) and what stands for
/// what at a replay.
pub struct Program {
    pub commands: Vec<Command>,
    /// The fused commands before merging, with their stages, where every one is a small stage
    /// (`fuse::all_small_stages`): a device loop merges them with its other program's and its
    /// state update (loops.rs). Their buffers are held as the commands' are.
    pub stages: Option<Vec<(Command, Option<crate::fuse::Stage>)>>,
    /// The device index it runs on.
    device: usize,
    _held: Vec<Held>,
    /// The placeholders' handles and byte sizes, in argument order.
    inputs: Vec<(u64, u64)>,
    /// The outputs a replay allocates afresh: handle and byte size, each once.
    fresh: Vec<(u64, u64)>,
    /// For each fresh output, the inputs it was computed from (their deferred checks pass on).
    depends: Vec<SmallVec<[u32; 4]>>,
    /// Deferred checks made in the program (templates, in order): their values are the last
    /// `checks.len()` fresh outputs, which a replay keeps for the checks it makes from these;
    /// `output_checks` says which of them each of the other fresh outputs carries.
    checks: Vec<Arc<crate::checks::Check>>,
    output_checks: Vec<SmallVec<[u32; 2]>>,
    /// Whether a replay runs the commands recorded once (`secondary`) on copies of the inputs,
    /// copying the outputs out, or records them again with the caller's buffers bound (see
    /// `worth_prerecording`).
    prerecorded: bool,
    /// The placeholders and the fresh outputs' own buffers (what the copies go to and from).
    placeholders: Vec<Subbuffer<[u8]>>,
    output_buffers: Vec<Subbuffer<[u8]>>,
    secondary: OnceLock<CommandBuffer>,
    /// Held while a replay queues its commands one by one (program_run).
    replaying: Mutex<()>,
    /// Barriers between the commands in the program's order, and in the order captured.
    barriers: (usize, usize),
    /// Fused kernels, and the dispatches they replaced (fuse.rs).
    fused: (usize, usize),
    /// Merged kernels of small stages, the commands they replaced, and the results they keep in
    /// shared memory (fuse.rs's `merge`).
    merged: (usize, usize, usize),
    /// Transposing copies folded into the GEMMs they read (peephole.rs).
    folded_transposes: usize,
}

impl Program {
    /// The program's command buffer, recorded at the first replay (by the GPU thread).
    pub fn secondary(&self) -> Result<&CommandBuffer> {
        if let Some(cb) = self.secondary.get() {
            return Ok(cb);
        }
        let cb = queue::record_secondary(&self.commands, false)?;
        Ok(self.secondary.get_or_init(|| cb))
    }

    pub fn prerecorded(&self) -> bool {
        self.prerecorded
    }

    pub fn device(&self) -> usize {
        self.device
    }

    /// What a replay binds in place of the captured buffers: (captured handle, the replay's
    /// buffer), the placeholders' then the fresh outputs'.
    pub fn substitutes<'r>(&self, replay: &'r Replay) -> SmallVec<[(u64, &'r Subbuffer<[u8]>); 16]> {
        let handles = self.inputs.iter().chain(&self.fresh).map(|&(h, _)| h);
        handles.zip(replay.inputs.iter().chain(&replay.outputs)).collect()
    }

    pub fn placeholders(&self) -> &[Subbuffer<[u8]>] {
        &self.placeholders
    }

    pub fn outputs(&self) -> &[Subbuffer<[u8]>] {
        &self.output_buffers
    }

    /// The deferred checks made in the program (templates, in order), each with the buffer its
    /// commands compute its value into (one of the last fresh outputs).
    pub fn check_values(&self) -> impl Iterator<Item = (&Arc<crate::checks::Check>, &Subbuffer<[u8]>)> {
        let first = self.output_buffers.len() - self.checks.len();
        self.checks.iter().zip(&self.output_buffers[first..])
    }
}

pub struct ProgramRef(pub Arc<Program>);

#[rustler::resource_impl]
impl rustler::Resource for ProgramRef {}

mod atoms {
    rustler::atoms! {
        ok, gave_up, fresh, input, external, commands, dispatches, barriers, barriers_in_capture_order, prerecorded,
        replay_copies, buffers, bytes, fused_kernels, fused_ops, merged_kernels, merged_commands, merged_shared, folded_transposes, kernels, loops, levels
    }
}

/// What one output of a program is at a replay.
enum OutputKind {
    /// The fresh buffer of this index in program_run's result.
    Fresh(usize),
    /// The caller's argument of this index, unchanged.
    Input(usize),
    /// The tensor the capture returned (made before it, e.g. a shared constant), unchanged.
    External,
}

impl Encoder for OutputKind {
    fn encode<'a>(&self, env: Env<'a>) -> Term<'a> {
        match self {
            OutputKind::Fresh(i) => (atoms::fresh(), *i).encode(env),
            OutputKind::Input(i) => (atoms::input(), *i).encode(env),
            OutputKind::External => atoms::external().encode(env),
        }
    }
}

/// Starts capturing the calling process's commands; `inputs` are the placeholders the function
/// will run on.
#[rustler::nif]
fn capture_begin(env: Env, inputs: Vec<BufferRef>, device: usize, for_loop: bool) -> Result<rustler::Atom> {
    if let Some(other) = inputs.iter().find(|b| b.device != device) {
        return Err(crate::error::arg_error!(
            "a program for Vulkan device {device} got a placeholder on device {}",
            other.device
        ));
    }
    let mut state = State::default();
    for input in &inputs {
        state.derived.insert(handle(&input.get()?));
    }
    let pid = env.pid();
    let mut list = CAPTURES.lock().map_err(|_| Error::Vulkan("the capture list lock was poisoned".into()))?;
    if list.iter().any(|(p, _)| *p == pid) {
        return Err(crate::error::arg_error!("this process is already recording a compiled program"));
    }
    list.push((pid, Arc::new(Capture { state: Mutex::new(state), device, for_loop })));
    ACTIVE.fetch_add(1, Ordering::AcqRel);
    Ok(atoms::ok())
}

fn take_capture(env: Env) -> Option<Arc<Capture>> {
    let pid = env.pid();
    let mut list = CAPTURES.lock().ok()?;
    let at = list.iter().position(|(p, _)| *p == pid)?;
    let (_, capture) = list.swap_remove(at);
    ACTIVE.fetch_sub(1, Ordering::AcqRel);
    Some(capture)
}

/// Ends the calling process's capture: `{:ok, program, output_kinds}` for `inputs` (the
/// placeholders, in argument order) and `outputs` (the tensors the function returned), or
/// `{:gave_up, reason}`. A dirty NIF: fusing compiles kernels (fuse.rs).
#[rustler::nif(schedule = "DirtyCpu")]
fn capture_end<'a>(env: Env<'a>, inputs: Vec<BufferRef>, outputs: Vec<BufferRef>) -> Result<Term<'a>> {
    let capture =
        take_capture(env).ok_or_else(|| crate::error::arg_error!("this process is not recording a program"))?;
    // Fusing creates the program's kernels on its device.
    let _device = crate::context::use_device(capture.device)?;
    let mut state = std::mem::take(&mut *capture.state());
    if let Some(reason) = state.gave_up.take() {
        return Ok((atoms::gave_up(), reason).encode(env));
    }
    let input_handles: Vec<u64> = inputs.iter().map(|b| b.get().map(|s| handle(&s))).collect::<Result<_>>()?;
    let mut fresh: Vec<(u64, u64)> = Vec::new();
    let mut kinds = Vec::with_capacity(outputs.len());
    for out in &outputs {
        let h = handle(&out.get()?);
        let kind = if let Some(i) = input_handles.iter().position(|&x| x == h) {
            OutputKind::Input(i)
        } else if state.allocated.contains(&h) && !state.folded.contains_key(&h) {
            let at = fresh.iter().position(|&(x, _)| x == h).unwrap_or_else(|| {
                fresh.push((h, out.bytes));
                fresh.len() - 1
            });
            OutputKind::Fresh(at)
        } else {
            OutputKind::External
        };
        kinds.push(kind);
    }
    // The checks the program's outputs carry (made while capturing): their values become more
    // outputs, so that each replay makes its outputs' checks over values of its own.
    // Per fresh output, its checks (positions in state.checks, the order they were made).
    let mut carried: Vec<Vec<usize>> = Vec::with_capacity(fresh.len());
    for &(h, _) in &fresh {
        let out = outputs
            .iter()
            .find(|o| o.get().is_ok_and(|b| handle(&b) == h))
            .ok_or_else(|| Error::Vulkan("a program output was deallocated while recorded".into()))?;
        let mut positions = Vec::new();
        for template in crate::checks::templates(out)? {
            let Some(k) = state.checks.iter().position(|(c, _)| Arc::ptr_eq(c, &template)) else {
                return Ok((atoms::gave_up(), "an output carries a deferred check made outside the program").encode(env));
            };
            positions.push(k);
        }
        carried.push(positions);
    }
    // The checks any output carries, in the order they were made (a replay makes its checks in
    // this order, so a read reports the earliest failure as the Evaluator would).
    let mut check_slots: Vec<usize> = carried.iter().flatten().copied().collect();
    check_slots.sort_unstable();
    check_slots.dedup();
    let output_checks: Vec<SmallVec<[u32; 2]>> = carried
        .iter()
        .map(|positions| positions.iter().map(|k| check_slots.binary_search(k).unwrap_or_else(|at| at) as u32).collect())
        .collect();
    let check_values: Vec<BufferRef> = check_slots.iter().map(|&k| state.checks[k].1.clone()).collect();
    let checks: Vec<Arc<crate::checks::Check>> = check_slots.iter().map(|&k| state.checks[k].0.clone()).collect();
    for value in &check_values {
        fresh.push((handle(&value.get()?), value.bytes));
    }
    let escapes: HashSet<u64> = fresh.iter().map(|&(h, _)| h).collect();
    // Which inputs flow into which outputs, from the commands as captured: a fused kernel reads
    // what all its members read and writes several results, which would tie an output to inputs
    // only a sibling read (and pass it their deferred checks).
    let depends = dependencies(&state.commands, &input_handles, &fresh);
    let (commands, folded_transposes) = crate::peephole::fold_transposed_gemms(std::mem::take(&mut state.commands), &escapes);
    let (fused_list, fused_kernels, fused_ops) = crate::fuse::fuse(commands, &escapes);
    // In captured order (fused, not yet merged: merging orders commands by level).
    let barriers_in_capture_order =
        queue::barriers_needed(&fused_list.iter().map(|(c, _)| c.clone()).collect::<Vec<_>>());
    // A device loop's condition or body of small stages only keeps them unmerged: the loop merges
    // its condition's, its body's and its state update's together. (They bind intermediates that
    // sharing would free, so other programs keep none.)
    let stages = (capture.for_loop && crate::fuse::merging() && crate::fuse::all_small_stages(&fused_list))
        .then(|| fused_list.clone());
    let (fused_list, merged_kernels, merged_commands, merged_shared) = crate::fuse::merge(fused_list);
    let (commands, levels) = by_level(fused_list);
    // What a replay's caller sees or the program keeps between replays keeps its own buffer.
    let keep: HashSet<u64> =
        input_handles.iter().chain(&escapes).copied().chain(state.folded.keys().copied()).collect();
    let (commands, unused) = share_buffers(commands, &levels, &keep);
    // The program holds what its commands bind and what it returns; intermediates that fused
    // kernels keep in registers, or that share another's buffer now, go back to the pool.
    let bound: HashSet<u64> = commands
        .iter()
        .chain(stages.iter().flatten().map(|(c, _)| c))
        .flat_map(|c| {
            let (reads, writes) = c.accesses();
            reads.into_iter().chain(writes)
        })
        .collect();
    let returned: HashSet<u64> = outputs.iter().filter_map(|o| o.get().ok()).map(|b| handle(&b)).collect();
    // (The kept stages bind buffers `share_buffers` may have freed from the commands.)
    let unused: HashSet<u64> = if stages.is_some() { HashSet::new() } else { unused };
    state.held.retain(|h, _| {
        !unused.contains(h)
            && (bound.contains(h) || returned.contains(h) || keep.contains(h) || !state.allocated.contains(h))
    });
    let output_buffers = fresh
        .iter()
        .map(|&(h, _)| outputs.iter().chain(&check_values).find_map(|o| o.get().ok().filter(|b| handle(b) == h)))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| Error::Vulkan("a program output was deallocated while recorded".into()))?;
    let inputs_sized: Vec<(u64, u64)> = input_handles.iter().zip(&inputs).map(|(&h, b)| (h, b.bytes)).collect();
    // A device loop submits and waits mid-way: it cannot be part of one command buffer.
    let has_loop = commands.iter().any(|c| matches!(c, Command::Loop(_)));
    let program = Program {
        device: capture.device,
        prerecorded: !has_loop
            && PRERECORD.unwrap_or_else(|| worth_prerecording(commands.len(), &inputs_sized, &fresh)),
        commands,
        stages,
        _held: state.held.drain().map(|(_, h)| h).collect(),
        inputs: inputs_sized,
        placeholders: inputs.iter().map(|b| b.get()).collect::<Result<_>>()?,
        output_buffers,
        fresh,
        depends,
        checks,
        output_checks,
        secondary: OnceLock::new(),
        replaying: Mutex::new(()),
        barriers: (0, barriers_in_capture_order),
        fused: (fused_kernels, fused_ops),
        merged: (merged_kernels, merged_commands, merged_shared),
        folded_transposes,
    };
    let program =
        Program { barriers: (queue::barriers_needed(&program.commands), barriers_in_capture_order), ..program };
    let program = ResourceArc::new(ProgramRef(Arc::new(program)));
    Ok((atoms::ok(), program, kinds).encode(env))
}

/// Abandons the calling process's capture, if any (the compiler's cleanup when the function
/// raised while captured).
#[rustler::nif]
fn capture_cancel(env: Env) -> rustler::Atom {
    drop(take_capture(env));
    atoms::ok()
}

/// The commands in dependency levels: each goes one level after the last command it depends on
/// (one that wrote what it reads, or read or wrote what it writes), and the commands keep their
/// order within a level. Commands of one level touch nothing another of the level writes, so the
/// recorder's hazard tracking puts one barrier between levels instead of one before nearly every
/// command of a chain-ordered capture (a barrier costs ~2 us on the H200, as much as a small
/// dispatch). Each command still computes from the same values, so results do not change.
pub(crate) fn by_level(commands: Vec<Command>) -> (Vec<Command>, Vec<usize>) {
    let levels = queue::levels(&commands);
    let mut ordered: Vec<(usize, Command)> = levels.into_iter().zip(commands).collect();
    ordered.sort_by_key(|(level, _)| *level);
    ordered.into_iter().map(|(level, c)| (c, level)).unzip()
}

/// Liveness-based reuse: an intermediate (not in `keep`) whose values are all written by the
/// program before any command reads it, and used in levels `[first, last]`, takes over the
/// buffer of an earlier intermediate of the same size whose last use is at a lower level than
/// `first`. Levels are separated by barriers wherever one's accesses conflict with the next's
/// (the recorder's hazard tracking sees the shared buffer's reads and writes), so no command of
/// the new value's writes can overtake a read of the old one; each command still reads what it
/// read before. Returns the commands and the buffers (handles) they no longer use.
fn share_buffers(commands: Vec<Command>, levels: &[usize], keep: &HashSet<u64>) -> (Vec<Command>, HashSet<u64>) {
    // Per buffer: the range it is bound at (only whole, identical bindings are swapped), the
    // levels of its first and last use, and whether a command reads it before one writes it.
    struct Use {
        binding: Subbuffer<[u8]>,
        first: usize,
        last: usize,
        written: bool,
        swappable: bool,
    }
    let mut uses: HashMap<u64, Use> = HashMap::new();
    let mut order: Vec<u64> = Vec::new();
    for (command, &level) in commands.iter().zip(levels) {
        let (reads, writes) = command.accesses();
        let bindings: SmallVec<[Subbuffer<[u8]>; 8]> = match command {
            Command::Dispatch(d) => d.bindings().iter().cloned().collect(),
            Command::Copy { src, dst, .. } => SmallVec::from_vec(vec![src.clone(), dst.clone()]),
            // Not shared around programs and loops (their buffers are bound inside them).
            Command::Program(_) | Command::Loop(_) => return (commands, HashSet::new()),
        };
        for binding in bindings {
            let h = handle(&binding);
            let written_here = writes.contains(&h);
            let entry = uses.entry(h).or_insert_with(|| {
                order.push(h);
                Use { binding: binding.clone(), first: level, last: level, written: false, swappable: true }
            });
            entry.last = entry.last.max(level);
            entry.swappable &= binding.offset() == entry.binding.offset() && binding.size() == entry.binding.size();
            if reads.contains(&h) && !entry.written {
                entry.swappable = false;
            }
            entry.written |= written_here;
        }
    }
    // Greedy, in order of first use: each candidate takes the first free buffer of its size.
    let mut free: Vec<(u64, Subbuffer<[u8]>, usize)> = Vec::new();
    let mut swap: HashMap<u64, Subbuffer<[u8]>> = HashMap::new();
    let mut candidates: Vec<u64> =
        order.into_iter().filter(|h| !keep.contains(h) && uses[h].swappable && uses[h].written).collect();
    candidates.sort_by_key(|h| uses[h].first);
    for h in candidates {
        let u = &uses[&h];
        let size = u.binding.size();
        match free.iter().position(|(_, b, free_after)| b.size() == size && *free_after < u.first) {
            Some(at) => {
                free[at].2 = u.last;
                swap.insert(h, free[at].1.clone());
            }
            None => free.push((h, u.binding.clone(), u.last)),
        }
    }
    if swap.is_empty() {
        return (commands, HashSet::new());
    }
    let swapped = |b: &Subbuffer<[u8]>| swap.get(&handle(b)).cloned().unwrap_or_else(|| b.clone());
    let commands = commands.iter().map(|command| command.with_buffers(swapped)).collect();
    (commands, swap.keys().copied().collect())
}

/// For each fresh output, the inputs whose values flow into it, following the commands in order
/// (each writes its last bindings, or a copy's destination, from what it reads).
fn dependencies(commands: &[Command], inputs: &[u64], fresh: &[(u64, u64)]) -> Vec<SmallVec<[u32; 4]>> {
    let words = inputs.len().div_ceil(64).max(1);
    let mut flows: HashMap<u64, Vec<u64>> = HashMap::new();
    for (i, &h) in inputs.iter().enumerate() {
        let mut bits = vec![0u64; words];
        bits[i / 64] |= 1 << (i % 64);
        flows.insert(h, bits);
    }
    for command in commands {
        let (reads, writes) = command.accesses();
        let mut from_reads = vec![0u64; words];
        for r in reads {
            if let Some(from) = flows.get(&r) {
                from_reads.iter_mut().zip(from).for_each(|(b, f)| *b |= f);
            }
        }
        for w in writes {
            let mut bits = flows.get(&w).cloned().unwrap_or_else(|| vec![0; words]);
            bits.iter_mut().zip(&from_reads).for_each(|(b, f)| *b |= f);
            flows.insert(w, bits);
        }
    }
    fresh
        .iter()
        .map(|(h, _)| {
            let bits = flows.get(h);
            (0..inputs.len())
                .filter(|i| bits.is_some_and(|b| b[i / 64] & (1 << (i % 64)) != 0))
                .map(|i| i as u32)
                .collect()
        })
        .collect()
}

/// Replays a program on `inputs` (tensors of the placeholders' sizes): queues its commands, with
/// the caller's buffers for the placeholders and fresh ones for the outputs, and returns the
/// outputs at once, like any op. The commands go through the queue one by one, so a long
/// program is submitted in batches (`NXV_BATCH_MAX`) that the GPU runs while the rest records.
#[rustler::nif]
fn program_run(env: Env, program: ResourceArc<ProgramRef>, inputs: Vec<BufferRef>) -> Result<Vec<BufferRef>> {
    let program = &program.0;
    let _device = crate::context::use_device(program.device)?;
    if let Some(other) = inputs.iter().find(|b| b.device != program.device) {
        return Err(Error::OtherDevice(format!(
            "a compiled program for Vulkan device {} got an argument on device {}; move it with \
             Nx.backend_transfer(tensor, {{Nx.Vulkan.Backend, device: {}}})",
            program.device,
            other.device,
            program.device
        )));
    }
    let _capture = scope(env);
    refuse("a compiled function was called")?;
    if inputs.len() != program.inputs.len() {
        return Err(crate::error::arg_error!(
            "a compiled program takes {} tensors, got {}",
            program.inputs.len(),
            inputs.len()
        ));
    }
    let mut in_buffers: SmallVec<[Subbuffer<[u8]>; 8]> = SmallVec::new();
    for (i, (input, &(_, bytes))) in inputs.iter().zip(&program.inputs).enumerate() {
        if input.bytes != bytes {
            return Err(crate::error::arg_error!(
                "argument {i} of a compiled program has {} bytes, its template {bytes}",
                input.bytes
            ));
        }
        in_buffers.push(input.get()?);
    }
    let mut outputs = Vec::with_capacity(program.fresh.len());
    let mut out_buffers: SmallVec<[Subbuffer<[u8]>; 8]> = SmallVec::new();
    for &(_, bytes) in &program.fresh {
        let out = tensor::alloc(bytes)?;
        out_buffers.push(out.get()?);
        outputs.push(out);
    }
    if inputs.iter().any(|b| b.checks.lock().map_or(false, |c| c.is_some())) {
        for (out, depends) in outputs.iter().zip(&program.depends) {
            let from: SmallVec<[&BufferRef; 4]> = depends.iter().map(|&i| &inputs[i as usize]).collect();
            crate::checks::inherit(out, &from)?;
        }
    }
    // The program's own checks, over this replay's copies of their values (the last outputs,
    // which the checks hold; the caller gets the others).
    let returned = program.fresh.len() - program.checks.len();
    if !program.checks.is_empty() {
        let values = &outputs[returned..];
        let made: Vec<_> =
            program.checks.iter().zip(values).map(|(t, v)| crate::checks::instantiate(t, v.clone())).collect();
        for (out, slots) in outputs.iter().zip(&program.output_checks) {
            if !slots.is_empty() {
                crate::checks::attach(out, slots.iter().map(|&s| made[s as usize].clone()).collect())?;
            }
        }
        outputs.truncate(returned);
    }
    let replay = Replay { program: program.clone(), inputs: in_buffers, outputs: out_buffers };
    if program.prerecorded || !queue::timing_per_command() {
        // One queue entry: the GPU thread records the whole replay at once (queue.rs).
        queue::record(Command::Program(replay))?;
        return Ok(outputs);
    }
    // With per-command GPU timing on, the commands go through the queue one by one, so that each
    // kernel's time is its own (bench/program_times.exs).
    let substitutes = program.substitutes(&replay);
    let swap = |b: &Subbuffer<[u8]>| queue::substitute(&substitutes, b).clone();
    let commands: Vec<Command> = program.commands.iter().map(|c| c.with_buffers(swap)).collect();
    // Replays share the program's intermediates: one replay's commands must reach the queue
    // together, or another process's replay could overwrite an intermediate between a write and
    // the read that needs it (the hazard tracking orders whole replays, not interleaved ones).
    let _replaying = program.replaying.lock().unwrap_or_else(|e| e.into_inner());
    for command in commands {
        queue::record(command)?;
    }
    Ok(outputs)
}

/// What a program is: `%{commands:, dispatches:, barriers:, barriers_in_capture_order:,
/// prerecorded:, replay_copies:, buffers:, bytes:}`.
#[rustler::nif]
fn program_info(env: Env, program: ResourceArc<ProgramRef>) -> Term {
    let p = &program.0;
    let dispatches = p.commands.iter().filter(|c| matches!(c, Command::Dispatch(_))).count();
    let bytes: u64 = p._held.iter().map(|h| h.0.bytes).sum();
    let replay_copies = if p.prerecorded { p.inputs.len() + p.fresh.len() } else { 0 };
    let pairs = [
        (atoms::commands(), p.commands.len().encode(env)),
        (atoms::dispatches(), dispatches.encode(env)),
        (atoms::barriers(), p.barriers.0.encode(env)),
        (atoms::barriers_in_capture_order(), p.barriers.1.encode(env)),
        (atoms::prerecorded(), p.prerecorded.encode(env)),
        (atoms::fused_kernels(), p.fused.0.encode(env)),
        (atoms::fused_ops(), p.fused.1.encode(env)),
        (atoms::merged_kernels(), p.merged.0.encode(env)),
        (atoms::merged_commands(), p.merged.1.encode(env)),
        (atoms::merged_shared(), p.merged.2.encode(env)),
        (atoms::folded_transposes(), p.folded_transposes.encode(env)),
        (atoms::replay_copies(), replay_copies.encode(env)),
        (atoms::buffers(), p._held.len().encode(env)),
        (atoms::bytes(), bytes.encode(env)),
    ];
    let kernels: Vec<&str> = p.commands.iter().map(Command::kernel_name).collect();
    // Per device loop: one iteration's kernels and levels.
    let loops: Vec<Term> = p
        .commands
        .iter()
        .filter_map(|c| match c {
            Command::Loop(run) => Some(run.looped.iteration()),
            _ => None,
        })
        .map(|(names, levels)| {
            let pairs = [(atoms::kernels().encode(env), names.encode(env)), (atoms::levels().encode(env), levels.encode(env))];
            Term::map_from_pairs(env, &pairs).unwrap_or_else(|_| atoms::ok().encode(env))
        })
        .collect();
    let mut pairs: Vec<(Term, Term)> = pairs.iter().map(|(k, v)| (k.encode(env), *v)).collect();
    pairs.push((atoms::kernels().encode(env), kernels.encode(env)));
    pairs.push((atoms::loops().encode(env), loops.encode(env)));
    Term::map_from_pairs(env, &pairs).unwrap_or_else(|_| atoms::ok().encode(env))
}
