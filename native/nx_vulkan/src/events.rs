//! Events for `:telemetry`, sent from the threads where they happen (the GPU thread's submissions
//! and flushes, the builder threads' pipeline creations) to the Elixir process that executes them
//! (`Nx.Vulkan.Telemetry`), which registers itself with `set_event_sink/1` at application start.
//! Without a sink nothing is sent. Events are plain tuples; the Elixir side names them:
//!
//!   {:nx_vulkan_event, :submit, reason, commands, us}    a command buffer submitted (us: the
//!                                                        GPU thread's recording and submitting)
//!   {:nx_vulkan_event, :flush, reason, commands, us}     a flush (the caller waited `us`)
//!   {:nx_vulkan_event, :pipeline, kernel, op, us}        a pipeline created
use crate::queue::{FlushReason, FLUSH_REASON_NAMES};
use once_cell::sync::Lazy;
use rustler::{Encoder, LocalPid, OwnedEnv};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::RwLock;

static SINK: Lazy<RwLock<Option<LocalPid>>> = Lazy::new(|| RwLock::new(None));
/// Whether a sink is set (read on every submission: an atomic, not the lock).
static ON: AtomicBool = AtomicBool::new(false);

mod atoms {
    rustler::atoms! { nx_vulkan_event, submit, flush, pipeline }
}

thread_local! {
    // One message environment per sending thread, cleared after each send.
    static ENV: RefCell<OwnedEnv> = RefCell::new(OwnedEnv::new());
}

fn send(message: impl FnOnce(rustler::Env) -> rustler::Term) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    let Some(pid) = SINK.read().ok().and_then(|s| *s) else { return };
    // Only non-BEAM threads send (the GPU thread, the builders); a send from a scheduler thread
    // would panic in send_and_clear, so it is skipped (no event there is part of the contract).
    if rustler::thread::is_scheduler_thread() {
        return;
    }
    ENV.with(|env| {
        let _ = env.borrow_mut().send_and_clear(&pid, message);
    });
}

fn atom<'a>(env: rustler::Env<'a>, name: &str) -> rustler::Term<'a> {
    rustler::Atom::from_str(env, name)
        .map(|a| a.encode(env))
        .unwrap_or_else(|_| name.encode(env))
}

fn reason_atom(env: rustler::Env, reason: FlushReason) -> rustler::Term {
    atom(env, FLUSH_REASON_NAMES[reason as usize])
}

/// `reason`: a flush reason's name, "batch_cap", "work", "commands", "idle", "program" or
/// "gpu_timing".
pub fn submit(reason: &'static str, commands: usize, us: u64) {
    send(|env| (atoms::nx_vulkan_event(), atoms::submit(), atom(env, reason), commands, us).encode(env));
}

pub fn flush(reason: FlushReason, commands: u64, us: u64) {
    send(|env| (atoms::nx_vulkan_event(), atoms::flush(), reason_atom(env, reason), commands, us).encode(env));
}

pub fn pipeline_created(kernel: &str, op: u32, us: u64) {
    send(|env| (atoms::nx_vulkan_event(), atoms::pipeline(), kernel, op, us).encode(env));
}

/// Sets (or, with anything but a pid, clears) the process events go to.
#[rustler::nif]
fn set_event_sink(sink: rustler::Term) -> rustler::Atom {
    let pid = sink.decode::<LocalPid>().ok();
    if let Ok(mut s) = SINK.write() {
        *s = pid;
    }
    ON.store(pid.is_some(), Ordering::Relaxed);
    rustler::types::atom::ok()
}
