//! Device and runtime NIFs: device info, flush, batch cap and counters.
use crate::context::{ctx, opened, use_device, MAX_DEVICES};
use crate::error::{arg_error, Error, Result};
use crate::pipelines;
use crate::queue::{self, FlushReason, BATCH_MAX, SPIN_US, FLUSH_REASON_NAMES, HOST_SYNC_NAMES};
use crate::tensor::memory_stats;
use rustler::{Encoder, Env, Term};
use std::sync::atomic::Ordering;

fn map<'a>(env: Env<'a>, pairs: Vec<(&str, Term<'a>)>) -> Term<'a> {
    let (keys, values): (Vec<Term>, Vec<Term>) = pairs
        .into_iter()
        .map(|(k, v)| (rustler::Atom::from_str(env, k).unwrap().encode(env), v))
        .unzip();
    Term::map_from_arrays(env, &keys, &values).unwrap()
}

/// Everything kernels and `Nx.Vulkan.Device` need to know about device `index` (nil: the
/// default); opens it (its context, and its shader modules loading in the background; its
/// tensor-core GEMM probed once the policy is configured).
#[rustler::nif(schedule = "DirtyIo")]
fn device_info(env: Env, index: Option<usize>) -> Result<Term> {
    let index = match index {
        Some(i) => i,
        None => crate::context::default_index()?,
    };
    let _device = use_device(index)?;
    static PRELOAD: [std::sync::Once; MAX_DEVICES] = [const { std::sync::Once::new() }; MAX_DEVICES];
    PRELOAD[index].call_once(|| pipelines::preload_modules(index));
    crate::ops::matmul::probe_coop()?;
    let i = &ctx()?.info;
    let heaps: Vec<Term> = i
        .heaps
        .iter()
        .map(|&(size, local)| map(env, vec![("size", size.encode(env)), ("device_local", local.encode(env))]))
        .collect();
    let e = |v: &dyn Encoder| v.encode(env);
    Ok(map(
        env,
        vec![
            ("index", e(&i.index)),
            ("name", e(&i.name)),
            ("type", e(&rustler::Atom::from_str(env, i.device_type).unwrap())),
            ("vendor_id", e(&i.vendor_id)),
            ("device_id", e(&i.device_id)),
            ("driver", e(&i.driver)),
            ("api_version", e(&i.api_version)),
            ("subgroup_size", e(&i.subgroup_size)),
            ("subgroup_ballot", e(&i.subgroup_ballot)),
            ("max_workgroup_invocations", e(&i.max_workgroup_invocations)),
            ("max_workgroup_count", e(&i.max_workgroup_count.to_vec())),
            ("max_shared_memory", e(&i.max_shared_memory)),
            ("max_push_constants", e(&i.max_push_constants)),
            ("max_storage_buffer_range", e(&i.max_storage_buffer_range)),
            ("memory_heaps", e(&heaps)),
            ("float64", e(&i.float64)),
            ("int64", e(&i.int64)),
            ("float16", e(&i.float16)),
            ("int8", e(&i.int8)),
            ("int16", e(&i.int16)),
            ("storage_8bit", e(&i.storage8)),
            ("storage_16bit", e(&i.storage16)),
            ("cooperative_matrix_f16", e(&i.coopmat_f16)),
            (
                "direct_read_bytes",
                match crate::tensor::direct_read_limit()? {
                    None => rustler::types::atom::Atom::from_str(env, "infinity").unwrap().encode(env),
                    Some(n) => n.encode(env),
                },
            ),
            (
                "devices",
                i.all_devices
                    .iter()
                    .map(|(index, name, kind)| {
                        map(env, vec![
                            ("index", index.encode(env)),
                            ("name", name.encode(env)),
                            ("type", rustler::Atom::from_str(env, kind).unwrap().encode(env)),
                        ])
                    })
                    .collect::<Vec<Term>>()
                    .encode(env),
            ),
        ],
    ))
}

/// Flushes every device opened, for `reason`.
fn flush_all(reason: FlushReason) -> Result<rustler::Atom> {
    for device in opened() {
        let _device = use_device(device)?;
        queue::flush(reason)?;
    }
    Ok(rustler::types::atom::ok())
}

#[rustler::nif(schedule = "DirtyIo")]
fn flush() -> Result<rustler::Atom> {
    flush_all(FlushReason::Explicit)
}

/// Flush before a host fallback reads its inputs (counted apart from explicit flushes).
#[rustler::nif(schedule = "DirtyIo")]
fn flush_for_fallback() -> Result<rustler::Atom> {
    flush_all(FlushReason::Fallback)
}

/// The queue's run-time counts (`Nx.Vulkan.set_batch_max/1`, `set_submit_bytes/1`,
/// `set_submit_commands/1`, `set_submit_idle/1`): one NIF each, every one a non-negative count
/// stored as it is.
macro_rules! count_setter {
    ($name:ident, $target:path, $what:literal, $ty:ty) => {
        #[rustler::nif]
        fn $name(n: i64) -> Result<rustler::Atom> {
            if n < 0 {
                return Err(arg_error!("{} must be >= 0, got {n}", $what));
            }
            $target.store(n as $ty, Ordering::Relaxed);
            Ok(rustler::types::atom::ok())
        }
    };
}

count_setter!(set_batch_max, BATCH_MAX, "batch max", usize);
count_setter!(set_submit_bytes, queue::SUBMIT_BYTES, "submit bytes", u64);
count_setter!(set_submit_commands, queue::SUBMIT_COMMANDS, "submit commands", usize);
count_setter!(set_submit_idle, queue::SUBMIT_IDLE, "submit idle", usize);
count_setter!(set_window_fusion, crate::window_fuse::AFTER, "window fusion", u32);

/// LP_NUM_THREADS for lavapipe, before the instance exists (context::set_lavapipe_threads).
#[rustler::nif]
fn set_lavapipe_threads(value: String) -> Result<rustler::Atom> {
    crate::context::set_lavapipe_threads(&value).map(|()| rustler::types::atom::ok())
}

/// Policy chosen on the Elixir side from the device class: whether f32/f16 math, and f32/f16 dot
/// products, compute in f64 (needs shaderFloat64), how long threads waiting on the GPU poll before blocking, and whether the device is a
/// CPU (kernel variants without barriers), the bytes of work that submit a command buffer early
/// (queue.rs, SUBMIT_BYTES; 0: never) and the commands that do (SUBMIT_COMMANDS), and how many
/// elements each invocation of the element-wise kernels visits (pipelines created later use it), and
/// a forced register-blocked GEMM block (0: by shape), and whether f16 GEMMs may take tensor cores
/// and with which block (NXV_GEMM_COOP: "0", "1" or a block's name; a dirty NIF: with them asked
/// for, it builds their pipelines, once, at start).
#[rustler::nif(schedule = "DirtyCpu")]
fn configure(
    precise_f32: bool,
    precise_dot: bool,
    spin_us: u64,
    cpu_device: bool,
    submit_bytes: u64,
    submit_commands: u64,
    submit_idle: u64,
    submit_programs: bool,
    elements_per_invocation: u32,
    workgroup: u32,
    gemm_block: u32,
    gemm_coop: String,
) -> Result<rustler::Atom> {
    if (precise_f32 || precise_dot) && !ctx()?.info.float64 {
        return Err(arg_error!("precise f32 needs shaderFloat64, which this device lacks"));
    }
    if !matches!(elements_per_invocation, 1 | 2 | 4 | 8 | 16) {
        return Err(arg_error!("elements per invocation must be 1, 2, 4, 8 or 16, got {elements_per_invocation}"));
    }
    if !matches!(workgroup, 32 | 64 | 128 | 256) {
        return Err(arg_error!("workgroup size must be 32, 64, 128 or 256, got {workgroup}"));
    }
    if !matches!(gemm_block, 0 | 64 | 65 | 128 | 129) {
        return Err(arg_error!("GEMM block must be 64, 65, 128 or 129 (0: by shape), got {gemm_block}"));
    }
    crate::policy::GEMM_BLOCK.store(gemm_block, Ordering::Relaxed);
    let blocks = crate::ops::matmul::COOP_BLOCKS;
    let gemm_coop = match gemm_coop.as_str() {
        "0" => 0,
        "1" => 1,
        name => blocks.iter().find(|&&(_, n)| n == name).map(|&(block, _)| block + 2).ok_or_else(|| {
            let names: Vec<&str> = blocks.iter().map(|&(_, n)| n).collect();
            arg_error!("NXV_GEMM_COOP must be 0, 1 or one of {}, got: {gemm_coop:?}", names.join(", "))
        })?,
    };
    crate::policy::GEMM_COOP.store(gemm_coop, Ordering::Relaxed);
    for device in opened() {
        let _device = use_device(device)?;
        crate::ops::matmul::probe_coop()?;
    }
    crate::policy::ELEMENTS_PER_INVOCATION.store(elements_per_invocation, Ordering::Relaxed);
    crate::policy::WORKGROUP.store(workgroup, Ordering::Relaxed);
    crate::policy::PRECISE_F32.store(precise_f32, Ordering::Relaxed);
    crate::policy::PRECISE_DOT.store(precise_dot, Ordering::Relaxed);
    crate::policy::CPU_DEVICE.store(cpu_device, Ordering::Relaxed);
    queue::SUBMIT_BYTES.store(submit_bytes, Ordering::Relaxed);
    queue::SUBMIT_COMMANDS.store(submit_commands as usize, Ordering::Relaxed);
    queue::SUBMIT_IDLE.store(submit_idle as usize, Ordering::Relaxed);
    queue::SUBMIT_PROGRAMS.store(submit_programs, Ordering::Relaxed);
    SPIN_US.store(spin_us, Ordering::Relaxed);
    Ok(rustler::types::atom::ok())
}

/// How long a buffer may wait in the pool before it is freed, in ms (0: forever).
#[rustler::nif]
fn set_pool_idle_ms(ms: u64) -> rustler::Atom {
    crate::tensor::POOL_IDLE_MS.store(ms, Ordering::Relaxed);
    rustler::types::atom::ok()
}

/// How old (since allocation) a buffer may be and still be pooled, in ms (0: any age).
#[rustler::nif]
fn set_pool_max_age_ms(ms: u64) -> rustler::Atom {
    crate::tensor::POOL_MAX_AGE_MS.store(ms, Ordering::Relaxed);
    rustler::types::atom::ok()
}

/// The device-memory budget in bytes (0: none); see memory.rs.
#[rustler::nif]
fn set_memory_limit(bytes: u64) -> rustler::Atom {
    crate::memory::set_limit(bytes);
    rustler::types::atom::ok()
}

/// The most commands, and bytes written by commands, queued before a producer waits.
#[rustler::nif]
fn set_pending_limits(commands: u64, bytes: u64) -> Result<rustler::Atom> {
    if commands == 0 || bytes == 0 {
        return Err(arg_error!("pending limits must be positive, got {commands} commands, {bytes} bytes"));
    }
    queue::MAX_QUEUED_COMMANDS.store(commands.min(usize::MAX as u64) as usize, Ordering::Relaxed);
    queue::MAX_QUEUED_BYTES.store(bytes, Ordering::Relaxed);
    Ok(rustler::types::atom::ok())
}

/// Starts the peaks (allocated and live bytes) again from what is in use now.
#[rustler::nif]
fn reset_peak() -> Result<rustler::Atom> {
    for device in opened() {
        let _device = use_device(device)?;
        crate::memory::reset_peak();
        crate::tensor::reset_peak();
    }
    Ok(rustler::types::atom::ok())
}

/// Whether a device's pending queue is past its bound: the caller should `throttle/0`.
#[rustler::nif]
fn queue_full() -> bool {
    opened().into_iter().any(|device| use_device(device).is_ok_and(|_device| queue::over_bound()))
}

/// Waits until every device's pending queue is within its bound (at once if it is).
#[rustler::nif(schedule = "DirtyIo")]
fn throttle() -> Result<rustler::Atom> {
    for device in opened() {
        let _device = use_device(device)?;
        queue::throttle()?;
    }
    Ok(rustler::types::atom::ok())
}

/// GPU time by kernel since the last call (with GPU timing on): `%{name => {commands, ns}}`;
/// the counters start again from zero.
#[rustler::nif]
fn take_kernel_times(env: Env) -> Result<Term> {
    let mut times = queue::KERNEL_TIMES
        .lock()
        .map_err(|_| Error::Vulkan("the kernel-time table is poisoned".into()))?;
    let pairs = times.drain().map(|(name, (n, ns))| (name, (n, ns).encode(env))).collect();
    Ok(map(env, pairs))
}

/// Turns GPU timestamps on or off (see `stats/0`'s gpu_ns): after every command, or only around
/// each submission; from the next command queued. Dirty: it waits for the GPU threads to record
/// what is pending.
#[rustler::nif(schedule = "DirtyIo")]
fn set_gpu_timing(on: bool, per_command: bool) -> Result<rustler::Atom> {
    queue::set_gpu_timing(on, per_command)?;
    Ok(rustler::types::atom::ok())
}

/// Counters and settings of device `index` (nil: the default); pipeline counts are the VM's.
#[rustler::nif]
fn stats(env: Env, index: Option<usize>) -> Result<Term> {
    let index = match index {
        Some(i) => i,
        None => crate::context::default_index()?,
    };
    let _device = use_device(index)?;
    let stats = queue::stats();
    let (created, hits, cached, create_us) = pipelines::stats();
    let (disk_cache_path, disk_cache) = crate::pipeline_disk_cache::info();
    let (live_bytes, live_buffers, peak_bytes) = memory_stats();
    let (pool_hits, pool_misses, pooled_bytes) = crate::tensor::pool_stats();
    let (queued_commands, queued_bytes) = queue::queued();
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed).encode(env);
    let flushes = map(
        env,
        FLUSH_REASON_NAMES
            .iter()
            .zip(stats.flushes.iter())
            .map(|(name, n)| (*name, load(n)))
            .collect(),
    );
    let host_syncs = map(
        env,
        HOST_SYNC_NAMES
            .iter()
            .zip(stats.host_syncs.iter())
            .filter_map(|(name, n)| name.map(|name| (name, load(n))))
            .collect(),
    );
    Ok(map(
        env,
        vec![
            ("device", index.encode(env)),
            ("batch_max", BATCH_MAX.load(Ordering::Relaxed).encode(env)),
            ("precise_f32", crate::policy::precise_f32().encode(env)),
            ("precise_dot", crate::policy::precise_dot().encode(env)),
            ("spin_us", SPIN_US.load(Ordering::Relaxed).encode(env)),
            ("cpu_device", crate::policy::cpu_device().encode(env)),
            ("submit_bytes", queue::SUBMIT_BYTES.load(Ordering::Relaxed).encode(env)),
            ("submit_commands", queue::SUBMIT_COMMANDS.load(Ordering::Relaxed).encode(env)),
            ("submit_idle", queue::SUBMIT_IDLE.load(Ordering::Relaxed).encode(env)),
            ("submit_programs", queue::SUBMIT_PROGRAMS.load(Ordering::Relaxed).encode(env)),
            ("early_submissions", load(&stats.early_submissions)),
            ("loop_chunks", load(&stats.loop_chunks)),
            ("loop_iterations", load(&stats.loop_iterations)),
            ("recorded", load(&stats.recorded)),
            ("barriers", load(&stats.barriers)),
            ("window_fusion", crate::window_fuse::AFTER.load(Ordering::Relaxed).encode(env)),
            ("window_replaced", load(&stats.window_replaced)),
            ("window_kernels", load(&stats.window_kernels)),
            ("window_templates", crate::window_fuse::BUILT.load(Ordering::Relaxed).encode(env)),
            ("window_unfusable", crate::window_fuse::UNFUSABLE.load(Ordering::Relaxed).encode(env)),
            ("window_building", crate::window_fuse::BUILDING.load(Ordering::Relaxed).encode(env)),
            ("submissions", load(&stats.submissions)),
            ("command_buffers", load(&stats.command_buffers)),
            ("flushes", flushes),
            ("host_syncs", host_syncs),
            ("record_ns", load(&stats.record_ns)),
            ("record_begin_ns", load(&stats.record_begin_ns)),
            ("record_driver_ns", load(&stats.record_driver_ns)),
            ("submit_ns", load(&stats.submit_ns)),
            ("wait_ns", load(&stats.wait_ns)),
            ("gpu_ns", load(&stats.gpu_ns)),
            ("gpu_timing", queue::GPU_TIMING.load(Ordering::Relaxed).encode(env)),
            ("pipelines_created", created.encode(env)),
            ("pipeline_hits", hits.encode(env)),
            ("fused_kernels_compiled", crate::fuse::COMPILED.load(Ordering::Relaxed).encode(env)),
            ("fused_kernels_from_disk", crate::fuse::FROM_DISK.load(Ordering::Relaxed).encode(env)),
            ("pipelines_cached", cached.encode(env)),
            ("pipeline_create_us", create_us.encode(env)),
            ("pipeline_driver_us", crate::pipelines::DRIVER_US.load(Ordering::Relaxed).encode(env)),
            ("pipeline_disk_cache", disk_cache_term(env, disk_cache_path, disk_cache)),
            ("live_bytes", live_bytes.encode(env)),
            ("live_buffers", live_buffers.encode(env)),
            ("peak_bytes", peak_bytes.encode(env)),
            ("buffer_pool_hits", pool_hits.encode(env)),
            ("buffer_pool_misses", pool_misses.encode(env)),
            ("pooled_bytes", pooled_bytes.encode(env)),
            ("pool_max_bytes", crate::tensor::pool_max_bytes().encode(env)),
            ("allocated_bytes", crate::memory::allocated().encode(env)),
            ("peak_allocated_bytes", crate::memory::peak().encode(env)),
            ("memory_limit", crate::memory::limit().encode(env)),
            ("queued_commands", queued_commands.encode(env)),
            ("queued_bytes", queued_bytes.encode(env)),
            ("pending_max_commands", queue::MAX_QUEUED_COMMANDS.load(Ordering::Relaxed).encode(env)),
            ("pending_max_bytes", queue::MAX_QUEUED_BYTES.load(Ordering::Relaxed).encode(env)),
            ("gemm_coop", crate::ops::matmul::coop_status().encode(env)),
        ],
    ))
}

/// `%{path: path | nil, status: :off | :missing | :loaded | :ignored, bytes: n, reason: why}`.
fn disk_cache_term<'a>(env: Env<'a>, path: Option<String>, loaded: crate::pipeline_disk_cache::Loaded) -> Term<'a> {
    use crate::pipeline_disk_cache::Loaded;
    let atom = |s: &str| rustler::Atom::from_str(env, s).unwrap().encode(env);
    let (status, bytes, reason) = match loaded {
        Loaded::Off => ("off", 0, String::new()),
        Loaded::Missing => ("missing", 0, String::new()),
        Loaded::Loaded(n) => ("loaded", n, String::new()),
        Loaded::Ignored(why) => ("ignored", 0, why),
    };
    map(
        env,
        vec![
            ("path", path.encode(env)),
            ("status", atom(status)),
            ("bytes", bytes.encode(env)),
            ("reason", reason.encode(env)),
        ],
    )
}
