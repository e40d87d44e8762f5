//! What the development probes (bench/coopmat_probe, bench/record_probe) share: each crate
//! includes this file as a module of its own (`#[path]`), so neither depends on the other.
use ash::vk;
use std::ffi::CStr;

/// A name the driver wrote into a fixed-size array.
pub fn name(raw: &[std::ffi::c_char]) -> String {
    unsafe { CStr::from_ptr(raw.as_ptr()) }.to_string_lossy().into_owned()
}

/// The first NVIDIA device, or else the first device: its handle, its properties and the index of
/// a queue family with compute.
pub unsafe fn pick_device(instance: &ash::Instance) -> (vk::PhysicalDevice, vk::PhysicalDeviceProperties, u32) {
    let devices = instance.enumerate_physical_devices().unwrap();
    let is_nvidia = |p: &vk::PhysicalDevice| name(&instance.get_physical_device_properties(*p).device_name).contains("NVIDIA");
    let pd = *devices.iter().find(|p| is_nvidia(p)).unwrap_or(&devices[0]);
    let family = instance
        .get_physical_device_queue_family_properties(pd)
        .iter()
        .position(|q| q.queue_flags.contains(vk::QueueFlags::COMPUTE))
        .unwrap() as u32;
    (pd, instance.get_physical_device_properties(pd), family)
}

/// Bindings 0..n of set 0, each one storage buffer of the compute stage.
pub fn storage_bindings(n: u32) -> Vec<vk::DescriptorSetLayoutBinding<'static>> {
    (0..n)
        .map(|i| {
            vk::DescriptorSetLayoutBinding::default()
                .binding(i)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
        })
        .collect()
}
