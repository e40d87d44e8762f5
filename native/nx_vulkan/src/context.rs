//! The one Vulkan context of the process: instance, the chosen physical and logical device, its
//! compute queue and allocators. Created lazily on first use so that a missing loader or device is
//! an error returned to Elixir (with a message saying what to install), not a failed NIF load.
use crate::error::{Error, Result};
use once_cell::sync::OnceCell;
use std::collections::HashSet;
use std::sync::Arc;
use vulkano::command_buffer::allocator::{StandardCommandBufferAllocator, StandardCommandBufferAllocatorCreateInfo};
use vulkano::device::physical::{PhysicalDevice, PhysicalDeviceType};
use vulkano::device::{
    Device, DeviceCreateInfo, DeviceExtensions, DeviceFeatures, Queue, QueueCreateInfo, QueueFlags,
};
use vulkano::instance::{Instance, InstanceCreateFlags, InstanceCreateInfo};
use vulkano::memory::MemoryHeapFlags;
use vulkano::VulkanLibrary;

/// What kernels and the Elixir side need to know about the device, read once.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub index: usize,
    pub name: String,
    pub device_type: &'static str,
    pub vendor_id: u32,
    pub device_id: u32,
    pub driver: String,
    pub api_version: String,
    pub subgroup_size: u32,
    pub max_workgroup_invocations: u32,
    pub max_workgroup_count: [u32; 3],
    pub max_shared_memory: u32,
    pub max_push_constants: u32,
    pub max_storage_buffer_range: u64,
    /// Nanoseconds per timestamp tick.
    pub timestamp_period: f32,
    pub heaps: Vec<(u64, bool)>,
    pub float64: bool,
    pub int64: bool,
    pub float16: bool,
    pub int8: bool,
    pub int16: bool,
    pub storage8: bool,
    pub storage16: bool,
    /// Tensor cores through VK_NV_cooperative_matrix: 16x16x16 subgroup matrices of f16 with f32
    /// accumulation, enabled on the device (gemm_coop.comp).
    pub coopmat_f16: bool,
    /// Every compute-capable device: (index for NXV_DEVICE, name, type).
    pub all_devices: Vec<(usize, String, &'static str)>,
}

/// Whether the driver lists subgroup-scoped 16x16x16 cooperative matrices with f16 A and B and
/// f32 C and D (VK_NV_cooperative_matrix's property query).
fn nv_coopmat_f16(physical: &PhysicalDevice) -> bool {
    use vulkano::{Handle, VulkanObject};
    use ash::vk;
    let query = physical.instance().fns().nv_cooperative_matrix.get_physical_device_cooperative_matrix_properties_nv;
    let handle = vk::PhysicalDevice::from_raw(physical.handle().as_raw());
    let mut count = 0u32;
    // SAFETY: the extension is supported (checked by the caller), the count/array protocol as
    // the specification gives it.
    if unsafe { query(handle, &mut count, std::ptr::null_mut()) } != vk::Result::SUCCESS {
        return false;
    }
    let mut props = vec![vk::CooperativeMatrixPropertiesNV::default(); count as usize];
    if unsafe { query(handle, &mut count, props.as_mut_ptr()) } != vk::Result::SUCCESS {
        return false;
    }
    props.iter().take(count as usize).any(|p| {
        (p.m_size, p.n_size, p.k_size) == (16, 16, 16)
            && p.a_type == vk::ComponentTypeNV::FLOAT16
            && p.b_type == vk::ComponentTypeNV::FLOAT16
            && p.c_type == vk::ComponentTypeNV::FLOAT32
            && p.d_type == vk::ComponentTypeNV::FLOAT32
            && p.scope == vk::ScopeNV::SUBGROUP
    })
}

pub struct Context {
    pub device: Arc<Device>,
    pub queue: Arc<Queue>,
    /// Counts and budgets every allocation (memory.rs).
    pub memory: Arc<crate::memory::BudgetAllocator>,
    pub command_buffers: Arc<StandardCommandBufferAllocator>,
    pub info: DeviceInfo,
}

static CONTEXT: OnceCell<std::result::Result<Context, Error>> = OnceCell::new();

/// The process-wide context; the first call creates it (and any error is returned forever after).
pub fn ctx() -> Result<&'static Context> {
    CONTEXT
        .get_or_init(create_on_init_thread)
        .as_ref()
        .map_err(|e| e.clone())
}

/// The nice value of a CPU device's driver threads and of the pipeline builders there
/// (`NXV_DRIVER_NICE`, 0 to 19; default 19). Measured on a 2-core machine (Linux 6.18's EEVDF
/// scheduler, lavapipe): two busy threads at nice 10 still kept a nice-0 process's 5 ms timer up
/// to 15 ms late, at 19 up to 5 ms; a long flush ran no slower. On a GPU nothing is niced: there
/// the driver's threads compile pipelines, and at nice 19 the H200's took 40 ms a pipeline
/// instead of 1.5 (cache hits, one process, 16 idle cores).
fn driver_nice() -> std::result::Result<i32, Error> {
    match std::env::var("NXV_DRIVER_NICE") {
        Ok(s) if !s.trim().is_empty() => match s.trim().parse::<i32>() {
            Ok(n) if (0..=19).contains(&n) => Ok(n),
            _ => Err(Error::Argument(format!("NXV_DRIVER_NICE must be an integer from 0 to 19, got: {s:?}"))),
        },
        _ => Ok(19),
    }
}

/// Lowers the calling thread's priority to the driver's (`driver_nice()`) on a CPU device: for
/// nx_vulkan's own threads that compile (the pipeline builders), which must not take the cores
/// from the BEAM's schedulers either.
pub fn nice_this_thread() {
    if crate::policy::cpu_device() {
        // A bad setting fails the context's creation, which reports it.
        set_nice(0, driver_nice().unwrap_or(19));
    }
}

/// Sets the nice value of thread `tid` of this process (0: the calling thread). Raising it needs
/// no privilege.
fn set_nice(tid: u32, nice: i32) {
    #[cfg(target_os = "linux")]
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, tid, nice);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (tid, nice);
}

/// This process's threads (Linux; empty elsewhere).
fn threads() -> HashSet<u32> {
    std::fs::read_dir("/proc/self/task")
        .map(|entries| entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

/// Creates the context on a thread of its own (drivers want more stack than a BEAM scheduler
/// has). On a CPU device, the threads the driver started meanwhile (lavapipe's, which run every
/// kernel on the host's cores; at the BEAM's priority they kept another process's 5 ms timer
/// waiting up to ~47 ms on a 2-core machine) get `driver_nice()`: they still have every core the
/// schedulers leave idle.
///
/// The thread then stays (parked) for the VM's life: a driver may keep per-thread state for the
/// thread that created its instance, as it would for a thread that lives on in most programs.
fn create_on_init_thread() -> std::result::Result<Context, Error> {
    let nice = driver_nice()?;
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name("nx_vulkan_init".into())
        .stack_size(16 << 20)
        .spawn(move || {
            let before = threads();
            let created = std::panic::catch_unwind(Context::create)
                .unwrap_or_else(|_| Err(Error::Vulkan("creating the Vulkan context panicked".into())));
            if matches!(&created, Ok(c) if c.info.device_type == "cpu") {
                for tid in threads().difference(&before) {
                    set_nice(*tid, nice);
                }
            }
            let _ = tx.send(created);
            loop {
                std::thread::park();
            }
        })
        .map_err(|e| Error::Vulkan(format!("starting the thread that creates the Vulkan context: {e}")))?;
    rx.recv().unwrap_or_else(|_| Err(Error::Vulkan("the thread creating the Vulkan context panicked".into())))
}

fn type_rank(t: PhysicalDeviceType) -> u32 {
    match t {
        PhysicalDeviceType::DiscreteGpu => 0,
        PhysicalDeviceType::IntegratedGpu => 1,
        PhysicalDeviceType::VirtualGpu => 2,
        PhysicalDeviceType::Cpu => 3,
        _ => 4,
    }
}

fn type_name(t: PhysicalDeviceType) -> &'static str {
    match t {
        PhysicalDeviceType::DiscreteGpu => "discrete_gpu",
        PhysicalDeviceType::IntegratedGpu => "integrated_gpu",
        PhysicalDeviceType::VirtualGpu => "virtual_gpu",
        PhysicalDeviceType::Cpu => "cpu",
        _ => "other",
    }
}

fn compute_family(p: &PhysicalDevice) -> Option<u32> {
    p.queue_family_properties()
        .iter()
        .position(|q| q.queue_flags.intersects(QueueFlags::COMPUTE))
        .map(|i| i as u32)
}

impl Context {
    fn create() -> Result<Context> {
        let library = VulkanLibrary::new().map_err(|e| {
            Error::Vulkan(format!(
                "no Vulkan loader could be opened ({e}); install one (Debian: libvulkan1, plus \
                 mesa-vulkan-drivers for a software device) or run scripts/setup.sh"
            ))
        })?;
        let instance = Instance::new(
            library,
            InstanceCreateInfo {
                flags: InstanceCreateFlags::ENUMERATE_PORTABILITY,
                ..Default::default()
            },
        )
        .map_err(|e| {
            // Most often VK_ERROR_INCOMPATIBLE_DRIVER: the loader found no driver (ICD) at all.
            Error::Vulkan(format!(
                "no usable Vulkan driver: creating the Vulkan instance failed ({e:?}); install a \
                 Vulkan driver (without a GPU: mesa-vulkan-drivers for lavapipe) or run \
                 scripts/setup.sh"
            ))
        })?;
        let mut devices: Vec<(usize, Arc<PhysicalDevice>)> = instance
            .enumerate_physical_devices()
            .map_err(|e| Error::vulkan("listing Vulkan devices", e))?
            .enumerate()
            .filter(|(_, p)| compute_family(p).is_some())
            .collect();
        if devices.is_empty() {
            return Err(Error::Vulkan(
                "no Vulkan device with a compute queue was found (on a machine without a GPU, \
                 install mesa-vulkan-drivers for lavapipe)"
                    .into(),
            ));
        }
        let all_devices: Vec<(usize, String, &'static str)> = devices
            .iter()
            .map(|(i, p)| (*i, p.properties().device_name.clone(), type_name(p.properties().device_type)))
            .collect();
        let chosen = match std::env::var("NXV_DEVICE") {
            Ok(s) if !s.trim().is_empty() => {
                let index: usize = s.trim().parse().map_err(|_| {
                    Error::Argument(format!("NXV_DEVICE must be a device index, got {s:?}"))
                })?;
                let count = devices.len();
                devices.into_iter().find(|(i, _)| *i == index).ok_or_else(|| {
                    Error::Argument(format!(
                        "NXV_DEVICE={index} but only {count} compute device(s) exist"
                    ))
                })?
            }
            _ => {
                devices.sort_by_key(|(i, p)| (type_rank(p.properties().device_type), *i));
                devices.remove(0)
            }
        };
        let (index, physical) = chosen;
        let family = compute_family(&physical).unwrap_or(0);
        let supported = physical.supported_features();
        let features = DeviceFeatures {
            shader_float64: supported.shader_float64,
            shader_int64: supported.shader_int64,
            shader_int16: supported.shader_int16,
            shader_int8: supported.shader_int8,
            shader_float16: supported.shader_float16,
            storage_buffer8_bit_access: supported.storage_buffer8_bit_access,
            storage_buffer16_bit_access: supported.storage_buffer16_bit_access,
            ..DeviceFeatures::empty()
        };
        let supported_ext = physical.supported_extensions();
        if !supported_ext.khr_push_descriptor {
            return Err(Error::Vulkan(format!(
                "device {} lacks VK_KHR_push_descriptor, which nx_vulkan needs",
                physical.properties().device_name
            )));
        }
        // Tensor cores where the driver offers NV cooperative matrices of the shape and types
        // gemm_coop.comp uses. If the device refuses them, it is created without.
        let coopmat = supported_ext.nv_cooperative_matrix
            && supported.cooperative_matrix
            && supported.vulkan_memory_model
            && supported.vulkan_memory_model_device_scope
            && physical.properties().subgroup_size == Some(32)
            && nv_coopmat_f16(&physical);
        let create = |coopmat: bool| {
            Device::new(
                physical.clone(),
                DeviceCreateInfo {
                    queue_create_infos: vec![QueueCreateInfo {
                        queue_family_index: family,
                        ..Default::default()
                    }],
                    enabled_extensions: DeviceExtensions {
                        khr_push_descriptor: true,
                        nv_cooperative_matrix: coopmat,
                        ..DeviceExtensions::empty()
                    },
                    // glslang writes cooperative-matrix modules in the Vulkan memory model; with
                    // it on, Device-scope barriers of the other kernels need the device scope.
                    enabled_features: DeviceFeatures {
                        cooperative_matrix: coopmat,
                        vulkan_memory_model: coopmat,
                        vulkan_memory_model_device_scope: coopmat,
                        ..features
                    },
                    ..Default::default()
                },
            )
        };
        let (coopmat, (device, mut queues)) = match create(coopmat) {
            Ok(created) => (coopmat, created),
            Err(_) if coopmat => (false, create(false).map_err(|e| Error::vulkan("creating the Vulkan device", e))?),
            Err(e) => return Err(Error::vulkan("creating the Vulkan device", e)),
        };
        // After the driver has loaded, so that at exit this runs before its destructors.
        crate::exit_guard::register();
        let queue = queues
            .next()
            .ok_or_else(|| Error::Vulkan("the device returned no queue".into()))?;
        let props = physical.properties();
        let heaps = physical
            .memory_properties()
            .memory_heaps
            .iter()
            .map(|h| (h.size, h.flags.intersects(MemoryHeapFlags::DEVICE_LOCAL)))
            .collect();
        let info = DeviceInfo {
            index,
            name: props.device_name.clone(),
            device_type: type_name(props.device_type),
            vendor_id: props.vendor_id,
            device_id: props.device_id,
            driver: props
                .driver_info
                .clone()
                .or_else(|| props.driver_name.clone())
                .unwrap_or_default(),
            api_version: physical.api_version().to_string(),
            subgroup_size: props.subgroup_size.unwrap_or(1),
            max_workgroup_invocations: props.max_compute_work_group_invocations,
            max_workgroup_count: props.max_compute_work_group_count,
            max_shared_memory: props.max_compute_shared_memory_size,
            max_push_constants: props.max_push_constants_size,
            max_storage_buffer_range: props.max_storage_buffer_range as u64,
            timestamp_period: props.timestamp_period,
            heaps,
            float64: features.shader_float64,
            int64: features.shader_int64,
            float16: features.shader_float16,
            int8: features.shader_int8,
            int16: features.shader_int16,
            storage8: features.storage_buffer8_bit_access,
            storage16: features.storage_buffer16_bit_access,
            coopmat_f16: coopmat,
            all_devices,
        };
        if info.max_push_constants < 128 {
            return Err(Error::Vulkan(format!(
                "device {} offers {} bytes of push constants; nx_vulkan's kernels need 128",
                info.name, info.max_push_constants
            )));
        }
        Ok(Context {
            memory: Arc::new(crate::memory::BudgetAllocator::new(device.clone())),
            // Secondary command buffers hold compiled programs (capture.rs), recorded once each.
            command_buffers: Arc::new(StandardCommandBufferAllocator::new(
                device.clone(),
                StandardCommandBufferAllocatorCreateInfo { secondary_buffer_count: 8, ..Default::default() },
            )),
            device,
            queue,
            info,
        })
    }
}
