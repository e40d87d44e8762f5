//! The pipeline cache: every compute pipeline is created once, keyed by kernel (shader family and
//! dtype variant) and specialization constants, and reused. Counters show creations vs hits.
//!
//! Creating a pipeline compiles the shader (100-140 ms per variant on lavapipe, LLVM), far too long
//! for the normal BEAM scheduler an op NIF runs on. So an op never creates one: on a miss it takes
//! the shader module (loaded ahead at start, `preload_modules`; a module the device cannot run
//! fails to load, so the op still goes to the host fallback at once), queues the variant for the
//! builder threads and records its dispatch against the `Pipeline` slot. The GPU thread waits for the slot (or builds
//! it itself if no builder has started it) when it records the dispatch; the caller only waits at
//! a read, on a dirty scheduler, as for any pending work. A creation error is reported at that
//! flush, as a recording error is.
//!
//! Pipelines go through one VkPipelineCache, saved to disk (pipeline_disk_cache.rs) after each burst
//! of creations and at application stop, and loaded at start, so on a driver that caches compiled
//! code a second VM start compiles nothing the first one compiled (lavapipe's cache holds none).
use crate::context::{ctx_at, current};
use crate::error::{unsupported, Error, Result};
use crate::pipeline_disk_cache;
use crossbeam_channel::{unbounded, Sender};
use dashmap::DashMap;
use once_cell::sync::{Lazy, OnceCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use vulkano::descriptor_set::layout::DescriptorSetLayoutCreateFlags;
use vulkano::device::Device;
use vulkano::pipeline::compute::ComputePipelineCreateInfo;
use vulkano::pipeline::layout::PipelineDescriptorSetLayoutCreateInfo;
use vulkano::pipeline::{ComputePipeline, PipelineLayout, PipelineShaderStageCreateInfo};
use vulkano::shader::{ShaderModule, SpecializationConstant};
use vulkano::{Validated, VulkanError};

pub type ShaderLoader = fn(Arc<Device>) -> std::result::Result<Arc<ShaderModule>, Validated<VulkanError>>;

/// A compiled shader variant: a family built with one set of defines.
#[derive(Clone, Copy)]
pub struct Kernel {
    pub name: &'static str,
    pub load: ShaderLoader,
    /// Built with T4 (common.glsl): the contiguous case runs a 16-byte vector per step.
    pub vectorized: bool,
    /// Its GLSL source and the defines it was built with, for the fused kernels that build on it
    /// (fuse.rs: a GEMM with an epilogue); empty for kernels compiled at run time.
    pub source: &'static str,
    pub defines: &'static [(&'static str, &'static str)],
}

/// The kernel's name by address and length (each is a distinct static string: no hashing of the
/// text on every dispatch; the length keeps a name apart from one it might prefix),
/// specialization constant 0, and the device index.
type Key = (usize, usize, u32, usize);

/// One pipeline variant, created at most once (by a builder thread or the GPU thread, whichever
/// comes first; the other waits for it).
pub struct Pipeline {
    kernel: Kernel,
    op: u32,
    /// The device index it is created on.
    device: usize,
    module: Arc<ShaderModule>,
    /// Elements each invocation visits (specialization constant 2 of the element-wise kernels,
    /// common.glsl's FOR_EACH_ELEMENT; 1 for every other kernel).
    pub per_invocation: u32,
    created: OnceCell<Result<Arc<ComputePipeline>>>,
}

/// A pipeline slot is never freed (one per kernel variant and device, and per fused kernel the
/// compiler generates, each made once; `forget_pipelines`, for tests, leaves the old ones
/// behind), so commands refer to it by a plain reference: a shared reference count, raised by
/// the caller and dropped by the GPU thread after the fence, moved a cache line between their
/// cores on every op.
pub type PipelineRef = &'static Pipeline;

impl Pipeline {
    /// Specialization constant 0 (the op code of an op family's kernel).
    pub fn op(&self) -> u32 {
        self.op
    }

    /// The kernel it runs.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// The same kernel's pipeline slot with specialization constant 0 set to `op`.
    pub fn with_op(&self, op: u32) -> Result<PipelineRef> {
        pipeline_on(self.device, self.kernel, op)
    }

    /// The created pipeline; creates it now if nobody has started to (blocks while another thread
    /// creates it). Called on the GPU thread and the builder threads only.
    pub fn get(&self) -> Result<&Arc<ComputePipeline>> {
        self.created.get_or_init(|| self.create()).as_ref().map_err(Clone::clone)
    }

    fn create(&self) -> Result<Arc<ComputePipeline>> {
        let started = Instant::now();
        let c = ctx_at(self.device)?;
        let name = self.kernel.name;
        let mut spec = HashMap::default();
        let constants = self.module.specialization_constants();
        if constants.contains_key(&0) {
            spec.insert(0, SpecializationConstant::U32(self.op));
        }
        // Constant 1, where a kernel has it, says the device is a GPU: math tables go to shared memory
        // (math64.glsl), copies divide by multipliers (copy.comp).
        if constants.contains_key(&1) {
            spec.insert(1, SpecializationConstant::Bool(!crate::policy::cpu_device()));
        }
        if constants.contains_key(&2) {
            spec.insert(2, SpecializationConstant::U32(self.per_invocation));
        }
        // Constant 3: the element-wise kernels' workgroup size (common.glsl), which the host's
        // grids assume (ops::elementwise_groups).
        if constants.contains_key(&3) {
            spec.insert(3, SpecializationConstant::U32(crate::policy::workgroup() as u32));
        }
        let entry = self
            .module
            .specialize(spec)
            .map_err(|e| Error::vulkan(&format!("specializing {name}"), e))?
            .entry_point("main")
            .ok_or_else(|| Error::Vulkan(format!("kernel {name} has no main")))?;
        let stage = PipelineShaderStageCreateInfo::new(entry);
        let mut layout_info = PipelineDescriptorSetLayoutCreateInfo::from_stages([&stage]);
        for set in layout_info.set_layouts.iter_mut() {
            set.flags |= DescriptorSetLayoutCreateFlags::PUSH_DESCRIPTOR;
        }
        let layout_info = layout_info
            .into_pipeline_layout_create_info(c.device.clone())
            .map_err(|e| Error::vulkan(&format!("pipeline layout of {name}"), format!("{e:?}")))?;
        let layout = PipelineLayout::new(c.device.clone(), layout_info)
            .map_err(|e| Error::vulkan(&format!("pipeline layout of {name}"), e))?;
        let in_driver = Instant::now();
        let pipeline = ComputePipeline::new(
            c.device.clone(),
            pipeline_disk_cache::cache(self.device),
            ComputePipelineCreateInfo::stage_layout(stage, layout),
        )
        .map_err(|e| Error::vulkan(&format!("creating pipeline {name}"), e))?;
        let us = started.elapsed().as_micros() as u64;
        CREATED.fetch_add(1, Ordering::Relaxed);
        CREATE_US.fetch_add(us, Ordering::Relaxed);
        DRIVER_US.fetch_add(in_driver.elapsed().as_micros() as u64, Ordering::Relaxed);
        pipeline_disk_cache::mark_dirty(self.device);
        crate::events::pipeline_created(name, self.op, us);
        Ok(pipeline)
    }
}

/// Looked up by every op (foldhash: SipHash measured a visible share of an eager op's host time).
static PIPELINE_CACHE: Lazy<DashMap<Key, PipelineRef, foldhash::fast::RandomState>> =
    Lazy::new(|| DashMap::with_hasher(Default::default()));
/// Shader modules by kernel and device, shared by its specializations.
static MODULES: Lazy<DashMap<(usize, usize, usize), Result<Arc<ShaderModule>>>> = Lazy::new(DashMap::new);

pub static CREATED: AtomicU64 = AtomicU64::new(0);
pub static CREATE_US: AtomicU64 = AtomicU64::new(0);
/// Of CREATE_US, the time in vkCreateComputePipelines (the driver's compile, or its cache hit);
/// the rest is specializing and reflecting the SPIR-V and the layouts.
pub static DRIVER_US: AtomicU64 = AtomicU64::new(0);
/// Cache hits, counted per thread (each slot has one writer, so a plain add: no locked
/// instruction on every op's path); `stats` sums them.
static HITS: [HitSlot; HIT_SLOTS] = [const { HitSlot(AtomicU64::new(0)) }; HIT_SLOTS];
/// A cache line each, so threads do not share one.
#[repr(align(64))]
struct HitSlot(AtomicU64);
const HIT_SLOTS: usize = 256;
static NEXT_HIT_SLOT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Bumped by `forget_pipelines`: threads' own caches below then start again.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Per thread: its hit slot, and the pipelines it looked up (of the current GENERATION), so an
/// op finds its pipeline without the shared map's lock.
struct Local {
    hit_slot: usize,
    generation: u64,
    pipelines: foldhash::HashMap<Key, PipelineRef>,
}

thread_local! {
    static LOCAL: std::cell::RefCell<Local> = std::cell::RefCell::new(Local {
        // Past HIT_SLOTS threads, slots are shared: a hit may then be lost, never an op.
        hit_slot: NEXT_HIT_SLOT.fetch_add(1, Ordering::Relaxed) % HIT_SLOTS,
        generation: 0,
        pipelines: Default::default(),
    });
}

fn count_hit(slot: usize) {
    HITS[slot].0.store(HITS[slot].0.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// The pipeline slot for `kernel` with specialization constant 0 set to `op` (kernels without one
/// ignore it). Never creates the pipeline (see the module doc): safe on a normal scheduler.
pub fn pipeline(kernel: Kernel, op: u32) -> Result<PipelineRef> {
    pipeline_on(current(), kernel, op)
}

fn pipeline_on(device: usize, kernel: Kernel, op: u32) -> Result<PipelineRef> {
    let key = (kernel.name.as_ptr() as usize, kernel.name.len(), op, device);
    let generation = GENERATION.load(Ordering::Acquire);
    let local = LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        if l.generation != generation {
            l.pipelines.clear();
            l.generation = generation;
        }
        let found = l.pipelines.get(&key).copied();
        if found.is_some() {
            count_hit(l.hit_slot);
        }
        found
    });
    if let Some(p) = local {
        return Ok(p);
    }
    if let Some(p) = PIPELINE_CACHE.get(&key).map(|p| *p) {
        LOCAL.with(|l| {
            let mut l = l.borrow_mut();
            count_hit(l.hit_slot);
            if l.generation == generation {
                l.pipelines.insert(key, p);
            }
        });
        return Ok(p);
    }
    let module = module(device, kernel)?;
    let per_invocation = if module.specialization_constants().contains_key(&2) {
        crate::policy::elements_per_invocation()
    } else {
        1
    };
    // Made under the map's entry lock, so a thread that loses a race leaves no slot behind.
    let mut made = false;
    let slot = *PIPELINE_CACHE.entry(key).or_insert_with(|| {
        made = true;
        new_slot(Pipeline { kernel, op, device, module, per_invocation, created: OnceCell::new() })
    });
    if made {
        build_soon(slot);
    }
    Ok(slot)
}

/// A pipeline slot for the life of the VM (see PipelineRef).
fn new_slot(pipeline: Pipeline) -> PipelineRef {
    Box::leak(Box::new(pipeline))
}

/// Hands a new slot to the builders, so it is usually created by the time the GPU thread
/// records it.
fn build_soon(slot: PipelineRef) {
    let _ = BUILDERS.send(slot);
}

/// The pipeline of a shader compiled at run time (the compiler's fused kernels, fuse.rs), created
/// by the builder threads (or at first use) as every other one.
pub fn runtime_pipeline(name: &'static str, module: Arc<ShaderModule>, op: u32) -> PipelineRef {
    fn compiled_at_run_time(_: Arc<Device>) -> std::result::Result<Arc<ShaderModule>, Validated<VulkanError>> {
        Err(Validated::Error(VulkanError::InitializationFailed))
    }
    let per_invocation =
        if module.specialization_constants().contains_key(&2) { crate::policy::elements_per_invocation() } else { 1 };
    let kernel = Kernel { name, load: compiled_at_run_time, vectorized: false, source: "", defines: &[] };
    let slot = new_slot(Pipeline { kernel, op, device: current(), module, per_invocation, created: OnceCell::new() });
    build_soon(slot);
    slot
}

/// A shader-module error with vulkano's problem text (its Display says only "a validation error
/// occurred").
fn describe(e: &vulkano::Validated<vulkano::VulkanError>) -> String {
    match e {
        vulkano::Validated::ValidationError(v) => v.to_string(),
        vulkano::Validated::Error(e) => e.to_string(),
    }
}

fn module(device: usize, kernel: Kernel) -> Result<Arc<ShaderModule>> {
    let key = (kernel.name.as_ptr() as usize, kernel.name.len(), device);
    if let Some(m) = MODULES.get(&key) {
        return m.clone();
    }
    // A module that needs a feature the device lacks (f64, int64, 8/16-bit storage) fails here:
    // that is "the device cannot do this", so the op goes through the host fallback (the failure
    // is kept too, so each later fallback does not load it again).
    let module = (kernel.load)(ctx_at(device)?.device.clone())
        .map_err(|e| unsupported!("kernel {} is not available on this device ({})", kernel.name, describe(&e)));
    MODULES.entry(key).or_insert(module).clone()
}

/// Loads every kernel's shader module for `device` on a background thread. vulkano parses the
/// SPIR-V of a module for reflection (up to ~5 ms for the largest kernels on lavapipe's host):
/// done when a device opens, no op does it on its scheduler (one used before this finishes loads
/// its own module).
pub fn preload_modules(device: usize) {
    let _ = std::thread::Builder::new()
        .name(format!("nx_vulkan_modules_{device}"))
        .spawn(move || {
            for kernel in crate::shaders::all() {
                let _inside = crate::exit_guard::enter();
                let _ = std::panic::catch_unwind(|| module(device, kernel));
            }
        });
}

/// Threads that create queued pipelines: half the cores (at least one, at most four;
/// `NXV_PIPELINE_BUILDERS` sets the count, 1 to 64), so a burst of first uses compiles in
/// parallel without taking every core from the BEAM.
static BUILDERS: Lazy<Sender<PipelineRef>> = Lazy::new(|| {
    let (tx, rx) = unbounded::<PipelineRef>();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let builders = std::env::var("NXV_PIPELINE_BUILDERS")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|&n| (1..=64).contains(&n))
        .unwrap_or((cores / 2).clamp(1, 4));
    for i in 0..builders {
        let rx = rx.clone();
        let _ = std::thread::Builder::new()
            .name(format!("nx_vulkan_pipelines_{i}"))
            // Shader compilers (LLVM in lavapipe) want more stack than the default 2 MiB.
            .stack_size(16 << 20)
            .spawn(move || {
                // Niced: on a machine with few cores (lavapipe's), compiling must not take the
                // CPU from the BEAM's schedulers.
                crate::context::nice_this_thread();
                crate::exit_guard::register_builder();
                while let Ok(slot) = rx.recv() {
                    // Errors are reported where the dispatch is recorded.
                    let _inside = crate::exit_guard::enter_build();
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| slot.get()));
                    if rx.is_empty() {
                        pipeline_disk_cache::save_if_dirty();
                    }
                }
            });
    }
    tx
});

/// Forgets every pipeline, so the next use of each variant creates it again: for tests and
/// benchmarks of first uses (the old slots stay allocated: queued commands may still use them).
#[rustler::nif]
fn forget_pipelines() -> rustler::Atom {
    PIPELINE_CACHE.clear();
    GENERATION.fetch_add(1, Ordering::AcqRel);
    rustler::types::atom::ok()
}

/// (created, hits, variants, microseconds spent creating).
pub fn stats() -> (u64, u64, usize, u64) {
    (
        CREATED.load(Ordering::Relaxed),
        HITS.iter().map(|h| h.0.load(Ordering::Relaxed)).sum(),
        PIPELINE_CACHE.len(),
        CREATE_US.load(Ordering::Relaxed),
    )
}
