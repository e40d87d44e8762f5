//! nx_vulkan's background threads and the process's exit.
//!
//! `erlang:halt/1` (what `elixir script.exs` ends with) calls exit(3), which runs the Vulkan
//! driver's destructors while the GPU thread, the pipeline builders and the pool trimmer may
//! still be inside the driver: on the H200 (NVIDIA 580) a script that ended while fused kernels'
//! pipelines were being created died with SIGSEGV. So each of those threads holds a `Use` while
//! it calls into the driver, and a handler registered with atexit(3) once the driver is loaded
//! (so it runs before the driver's own) stops new uses and waits, at most EXIT_WAIT, for the
//! current ones to end. A thread that would start one after that parks for good.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static EXITING: AtomicBool = AtomicBool::new(false);
static INSIDE: AtomicUsize = AtomicUsize::new(0);
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// A background thread's use of the driver, from `enter` until dropped.
pub struct Use(());

impl Drop for Use {
    fn drop(&mut self) {
        INSIDE.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Marks the calling thread as inside the driver; once the process is exiting, never returns.
pub fn enter() -> Use {
    INSIDE.fetch_add(1, Ordering::AcqRel);
    if EXITING.load(Ordering::Acquire) {
        INSIDE.fetch_sub(1, Ordering::AcqRel);
        loop {
            std::thread::park();
        }
    }
    Use(())
}

extern "C" fn at_exit() {
    EXITING.store(true, Ordering::Release);
    let started = Instant::now();
    while INSIDE.load(Ordering::Acquire) > 0 && started.elapsed() < EXIT_WAIT {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Registers the exit handler; called once the driver is loaded (the device exists).
pub fn register() {
    unsafe {
        libc::atexit(at_exit);
    }
}
