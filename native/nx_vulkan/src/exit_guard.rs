//! nx_vulkan's background threads and the process's exit.
//!
//! `erlang:halt/1` (what `elixir script.exs` ends with) calls exit(3), which runs the Vulkan
//! driver's destructors while the GPU thread, the pipeline builders and the pool trimmer may
//! still be inside the driver: on the H200 (NVIDIA 580) a script that ended while fused kernels'
//! pipelines were being created died with SIGSEGV. So each of those threads holds a `Use` while
//! it calls into the driver, and a handler registered with atexit(3) once the driver is loaded
//! (so it runs before the driver's own) stops new uses and waits, at most EXIT_WAIT, for the
//! current ones to end. A thread that would start one after that parks for good.
//!
//! A pipeline builder compiling (LLVM, on lavapipe) ends by itself, but builders run at the
//! lowest priority on CPU devices, and on a loaded machine one compile can take longer than
//! EXIT_WAIT: a child VM of the test suite, run beside two others on two cores, died at exit
//! with "LLVM ERROR: out of memory" after all its tests had passed. So at exit the builders get
//! the normal priority back (where the process may raise it) and are waited for up to
//! BUILD_WAIT. Then, with no thread of ours inside the driver, every opened device is waited
//! idle, so the driver's destructors do not run under work it still executes.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static EXITING: AtomicBool = AtomicBool::new(false);
static INSIDE: AtomicUsize = AtomicUsize::new(0);
/// Of those inside, the pipeline builders.
static BUILDING: AtomicUsize = AtomicUsize::new(0);
/// The builders' thread ids (Linux), for their priority at exit.
static BUILDERS: Mutex<Vec<i32>> = Mutex::new(Vec::new());
const EXIT_WAIT: Duration = Duration::from_secs(5);
const BUILD_WAIT: Duration = Duration::from_secs(120);

/// A background thread's use of the driver, from `enter` until dropped.
pub struct Use {
    build: bool,
}

impl Drop for Use {
    fn drop(&mut self) {
        if self.build {
            BUILDING.fetch_sub(1, Ordering::AcqRel);
        }
        INSIDE.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Marks the calling thread as inside the driver; once the process is exiting, never returns.
pub fn enter() -> Use {
    enter_as(false)
}

/// The same for a pipeline builder (waited for longer at exit).
pub fn enter_build() -> Use {
    enter_as(true)
}

fn enter_as(build: bool) -> Use {
    INSIDE.fetch_add(1, Ordering::AcqRel);
    if build {
        BUILDING.fetch_add(1, Ordering::AcqRel);
    }
    if EXITING.load(Ordering::Acquire) {
        if build {
            BUILDING.fetch_sub(1, Ordering::AcqRel);
        }
        INSIDE.fetch_sub(1, Ordering::AcqRel);
        loop {
            std::thread::park();
        }
    }
    Use { build }
}

/// Registers the calling thread as a pipeline builder.
pub fn register_builder() {
    #[cfg(target_os = "linux")]
    if let Ok(mut tids) = BUILDERS.lock() {
        tids.push(unsafe { libc::gettid() });
    }
}

extern "C" fn at_exit() {
    EXITING.store(true, Ordering::Release);
    #[cfg(target_os = "linux")]
    if let Ok(tids) = BUILDERS.lock() {
        for &tid in tids.iter() {
            // Fails without the privilege to raise a priority: the wait below still holds.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 0) };
        }
    }
    let started = Instant::now();
    loop {
        let (inside, building) = (INSIDE.load(Ordering::Acquire), BUILDING.load(Ordering::Acquire));
        let elapsed = started.elapsed();
        let others_wait = inside > building && elapsed < EXIT_WAIT;
        let builders_wait = building > 0 && elapsed < BUILD_WAIT;
        if inside == 0 || !(others_wait || builders_wait) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    if INSIDE.load(Ordering::Acquire) == 0 {
        crate::context::wait_idle_at_exit();
    }
}

/// Registers the exit handler; called once the driver is loaded (the device exists).
pub fn register() {
    unsafe {
        libc::atexit(at_exit);
    }
}
