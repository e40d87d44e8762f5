//! The pipeline cache: every compute pipeline is created once, keyed by kernel (shader family and
//! dtype variant) and specialization constants, and reused. Counters show creations vs hits.
use crate::context::ctx;
use crate::error::{unsupported, Error, Result};
use dashmap::DashMap;
use once_cell::sync::Lazy;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
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
}

/// The kernel's name by address and length (each is a distinct static string: no hashing of the
/// text on every dispatch; the length keeps a name apart from one it might prefix) and
/// specialization constant 0.
type Key = (usize, usize, u32);

/// A pipeline and how many elements each invocation visits (specialization constant 2 of the
/// element-wise kernels, common.glsl's FOR_EACH_ELEMENT; 1 for every other kernel).
type Cached = (Arc<ComputePipeline>, u32);

static PIPELINE_CACHE: Lazy<DashMap<Key, Cached>> = Lazy::new(DashMap::new);

pub static CREATED: AtomicU64 = AtomicU64::new(0);
pub static HITS: AtomicU64 = AtomicU64::new(0);

/// The pipeline for `kernel` with specialization constant 0 set to `op` (kernels without one ignore it).
pub fn pipeline(kernel: Kernel, op: u32) -> Result<Arc<ComputePipeline>> {
    Ok(cached(kernel, op)?.0)
}

/// The pipeline and its elements per invocation.
pub fn cached(kernel: Kernel, op: u32) -> Result<Cached> {
    let key = (kernel.name.as_ptr() as usize, kernel.name.len(), op);
    if let Some(p) = PIPELINE_CACHE.get(&key) {
        HITS.fetch_add(1, Ordering::Relaxed);
        return Ok(p.clone());
    }
    let created = create(kernel, op)?;
    CREATED.fetch_add(1, Ordering::Relaxed);
    Ok(PIPELINE_CACHE.entry(key).or_insert(created).clone())
}

/// A shader-module error with vulkano's problem text (its Display says only "a validation error
/// occurred").
fn describe(e: &vulkano::Validated<vulkano::VulkanError>) -> String {
    match e {
        vulkano::Validated::ValidationError(v) => v.to_string(),
        vulkano::Validated::Error(e) => e.to_string(),
    }
}

fn create(kernel: Kernel, op: u32) -> Result<Cached> {
    let c = ctx()?;
    // A module that needs a feature the device lacks (f64, int64, 8/16-bit storage) fails here:
    // that is "the device cannot do this", so the op goes through the host fallback.
    let module = (kernel.load)(c.device.clone())
        .map_err(|e| unsupported!("kernel {} is not available on this device ({})", kernel.name, describe(&e)))?;
    let mut spec = HashMap::default();
    if module.specialization_constants().contains_key(&0) {
        spec.insert(0, SpecializationConstant::U32(op));
    }
    // Constant 1, where a kernel has it, moves math tables to shared memory on GPUs (math64.glsl).
    if module.specialization_constants().contains_key(&1) {
        spec.insert(1, SpecializationConstant::Bool(!crate::policy::cpu_device()));
    }
    let mut per_invocation = 1;
    if module.specialization_constants().contains_key(&2) {
        per_invocation = crate::policy::elements_per_invocation();
        spec.insert(2, SpecializationConstant::U32(per_invocation));
    }
    let entry = module
        .specialize(spec)
        .map_err(|e| Error::vulkan(&format!("specializing {}", kernel.name), e))?
        .entry_point("main")
        .ok_or_else(|| Error::Vulkan(format!("kernel {} has no main", kernel.name)))?;
    let stage = PipelineShaderStageCreateInfo::new(entry);
    let mut layout_info = PipelineDescriptorSetLayoutCreateInfo::from_stages([&stage]);
    for set in layout_info.set_layouts.iter_mut() {
        set.flags |= DescriptorSetLayoutCreateFlags::PUSH_DESCRIPTOR;
    }
    let layout_info = layout_info
        .into_pipeline_layout_create_info(c.device.clone())
        .map_err(|e| Error::vulkan(&format!("pipeline layout of {}", kernel.name), format!("{e:?}")))?;
    let layout = PipelineLayout::new(c.device.clone(), layout_info)
        .map_err(|e| Error::vulkan(&format!("pipeline layout of {}", kernel.name), e))?;
    let pipeline = ComputePipeline::new(
        c.device.clone(),
        None,
        ComputePipelineCreateInfo::stage_layout(stage, layout),
    )
    .map_err(|e| Error::vulkan(&format!("creating pipeline {}", kernel.name), e))?;
    Ok((pipeline, per_invocation))
}

pub fn stats() -> (u64, u64, usize) {
    (
        CREATED.load(Ordering::Relaxed),
        HITS.load(Ordering::Relaxed),
        PIPELINE_CACHE.len(),
    )
}
