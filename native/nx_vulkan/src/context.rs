//! The VM's Vulkan devices: one instance, and for each device index in use a context of its own
//! (logical device, compute queue, allocators), created lazily on first use so that a missing
//! loader or device is an error returned to Elixir (with a message saying what to install), not a
//! failed NIF load.
//!
//! Device indices: without `NXV_LOGICAL_DEVICES`, the physical compute devices in the driver's
//! order (the default is `NXV_DEVICE`, else the best by type); another index than the default
//! opens only a device of the default's model (the class policy, policy.rs, is the default
//! device's). With `NXV_LOGICAL_DEVICES=n`, indices 0..n-1 are n logical devices opened on the
//! default physical device, each with its own queue, GPU thread, pool and pipelines, so every
//! multi-device path runs on a machine with one GPU (or lavapipe); the default is 0.
//!
//! Which device a NIF works on: the calling thread's current device (`current`), set for the
//! call by `use_device`/`use_device_of` (op NIFs: the device of their tensors) and for good on
//! each device's GPU thread. Everything per device (queue.rs, tensor.rs's pool, pipelines.rs,
//! memory.rs's counters) is kept in arrays indexed by it.
use crate::error::{Error, Result};
use once_cell::sync::OnceCell;
use std::cell::Cell;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use vulkano::command_buffer::allocator::{StandardCommandBufferAllocator, StandardCommandBufferAllocatorCreateInfo};
use vulkano::device::physical::{PhysicalDevice, PhysicalDeviceType};
use vulkano::device::{
    Device, DeviceCreateInfo, DeviceExtensions, DeviceFeatures, Queue, QueueCreateInfo, QueueFlags,
};
use vulkano::instance::{Instance, InstanceCreateFlags, InstanceCreateInfo};
use vulkano::device::physical::SubgroupFeatures;
use vulkano::memory::MemoryHeapFlags;
use vulkano::shader::ShaderStages;
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
    /// Subgroup ballots in compute shaders (sort_radix.comp ranks keys with them).
    pub subgroup_ballot: bool,
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

/// The most device indices a VM can use (physical or logical).
pub const MAX_DEVICES: usize = 16;

/// The instance and what it lists, made once.
struct Platform {
    /// Compute-capable physical devices with their indices in the driver's order.
    devices: Vec<(usize, Arc<PhysicalDevice>)>,
    /// The default device index (see the module doc).
    default: usize,
    /// NXV_LOGICAL_DEVICES: indices 0..n-1 are logical devices on this physical device.
    logical: Option<(usize, Arc<PhysicalDevice>)>,
}

static PLATFORM: OnceCell<std::result::Result<Platform, Error>> = OnceCell::new();
static CONTEXTS: [OnceCell<std::result::Result<Context, Error>>; MAX_DEVICES] = [const { OnceCell::new() }; MAX_DEVICES];
/// The default index once the platform is known (usize::MAX before).
static DEFAULT: AtomicUsize = AtomicUsize::new(usize::MAX);

thread_local! {
    /// The device the NIF running on this thread works on (None: the default).
    static CURRENT: Cell<Option<usize>> = const { Cell::new(None) };
}

fn platform() -> Result<&'static Platform> {
    PLATFORM.get_or_init(|| on_init_thread(Platform::open)).as_ref().map_err(|e| e.clone())
}

/// Sets lavapipe's worker-thread count (LP_NUM_THREADS) in the process environment, which its
/// driver reads when the instance enumerates devices: so only before the instance exists (the
/// application's start decides, see Nx.Vulkan.Application). libc's environment, which the
/// driver reads; the BEAM's os:putenv does not reach it.
pub fn set_lavapipe_threads(value: &str) -> Result<()> {
    if PLATFORM.get().is_some() {
        return Err(Error::Argument("LP_NUM_THREADS can be set only before the Vulkan instance is created".into()));
    }
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::Argument(format!("LP_NUM_THREADS must be a number of threads, got: {value:?}")));
    }
    std::env::set_var("LP_NUM_THREADS", value);
    Ok(())
}

/// The default device index (creates the instance on first use).
pub fn default_index() -> Result<usize> {
    match DEFAULT.load(Ordering::Relaxed) {
        usize::MAX => platform().map(|p| p.default),
        i => Ok(i),
    }
}

/// The device the calling thread works on now.
pub fn current() -> usize {
    CURRENT.with(|c| c.get()).unwrap_or_else(|| default_index().unwrap_or(0))
}

/// The context of the calling thread's current device; the first call creates it (and any error
/// is returned forever after).
pub fn ctx() -> Result<&'static Context> {
    ctx_at(current())
}

/// The context of device `index`, created on first use.
pub fn ctx_at(index: usize) -> Result<&'static Context> {
    let slot = CONTEXTS.get(index).ok_or_else(|| no_such_device(index))?;
    slot.get_or_init(|| {
        let platform = platform()?;
        let physical = platform.physical(index)?;
        on_init_thread(move || Context::create(index, &physical, platform))
    })
    .as_ref()
    .map_err(|e| e.clone())
}

fn no_such_device(index: usize) -> Error {
    let listed = platform().map(|p| p.indices()).unwrap_or_default();
    let listed: Vec<String> = listed.iter().map(|i| i.to_string()).collect();
    Error::Argument(format!(
        "no Vulkan device has index {index}; this VM's devices are {} (NXV_LOGICAL_DEVICES=n opens n \
         logical devices on one)",
        listed.join(", ")
    ))
}

/// At exit (exit_guard.rs, with no thread of ours inside the driver): waits until every opened
/// device has finished the work submitted to it.
pub fn wait_idle_at_exit() {
    for slot in CONTEXTS.iter() {
        if let Some(Ok(c)) = slot.get() {
            let _ = unsafe { c.device.wait_idle() };
        }
    }
}

/// The indices of the devices opened so far.
pub fn opened() -> Vec<usize> {
    (0..MAX_DEVICES).filter(|&i| matches!(CONTEXTS[i].get(), Some(Ok(_)))).collect()
}

/// Makes `index` the calling thread's current device until the guard drops (creating its
/// context if needed).
pub fn use_device(index: usize) -> Result<UseDevice> {
    ctx_at(index)?;
    Ok(UseDevice(CURRENT.with(|c| c.replace(Some(index)))))
}

/// Makes the device that holds `buffers` current for the call; an error names both devices when
/// they are on different ones.
pub fn use_device_of(buffers: &[&crate::tensor::BufferRef]) -> Result<UseDevice> {
    let Some(first) = buffers.first() else {
        return Ok(UseDevice(CURRENT.with(|c| c.get())));
    };
    if let Some(other) = buffers.iter().find(|b| b.device != first.device) {
        return Err(Error::OtherDevice(format!(
            "an op got tensors on Vulkan devices {} and {}: move one with \
             Nx.backend_transfer(tensor, {{Nx.Vulkan.Backend, device: {}}}) (a process working on \
             one device makes its constants there with Nx.default_backend({{Nx.Vulkan.Backend, \
             device: {}}}))",
            first.device, other.device, first.device, first.device
        )));
    }
    Ok(UseDevice(CURRENT.with(|c| c.replace(Some(first.device)))))
}

/// Sets the calling thread's device for good (each device's GPU and builder threads).
pub fn set_thread_device(index: usize) {
    CURRENT.with(|c| c.set(Some(index)));
}

/// Restores the thread's previous device when dropped.
pub struct UseDevice(Option<usize>);

impl Drop for UseDevice {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.0));
    }
}

impl Platform {
    fn open() -> Result<Platform> {
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
        let devices: Vec<(usize, Arc<PhysicalDevice>)> = instance
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
        let chosen = match std::env::var("NXV_DEVICE") {
            Ok(s) if !s.trim().is_empty() => {
                let index: usize = s.trim().parse().map_err(|_| {
                    Error::Argument(format!("NXV_DEVICE must be a device index, got {s:?}"))
                })?;
                devices.iter().find(|(i, _)| *i == index).cloned().ok_or_else(|| {
                    Error::Argument(format!(
                        "NXV_DEVICE={index} but only {} compute device(s) exist",
                        devices.len()
                    ))
                })?
            }
            _ => devices
                .iter()
                .min_by_key(|(i, p)| (type_rank(p.properties().device_type), *i))
                .cloned()
                .expect("devices is not empty"),
        };
        let logical = match std::env::var("NXV_LOGICAL_DEVICES") {
            Ok(s) if !s.trim().is_empty() => match s.trim().parse::<usize>() {
                Ok(n) if (1..=MAX_DEVICES).contains(&n) => Some(n),
                _ => {
                    return Err(Error::Argument(format!(
                        "NXV_LOGICAL_DEVICES must be an integer from 1 to {MAX_DEVICES}, got {s:?}"
                    )))
                }
            },
            _ => None,
        };
        let platform = match logical {
            Some(n) => Platform { devices, default: 0, logical: Some((n, chosen.1)) },
            None if chosen.0 >= MAX_DEVICES => {
                return Err(Error::Argument(format!(
                    "device {} is past the {MAX_DEVICES} device indices nx_vulkan can use",
                    chosen.0
                )))
            }
            None => Platform { default: chosen.0, devices, logical: None },
        };
        DEFAULT.store(platform.default, Ordering::Relaxed);
        Ok(platform)
    }

    fn indices(&self) -> Vec<usize> {
        match &self.logical {
            Some((n, _)) => (0..*n).collect(),
            None => self.devices.iter().map(|(i, _)| *i).filter(|&i| i < MAX_DEVICES).collect(),
        }
    }

    /// The physical device behind `index`: another than the default's only of the same model.
    fn physical(&self, index: usize) -> Result<Arc<PhysicalDevice>> {
        if let Some((n, physical)) = &self.logical {
            return if index < *n { Ok(physical.clone()) } else { Err(no_such_device(index)) };
        }
        let find = |i: usize| self.devices.iter().find(|(j, _)| *j == i).map(|(_, p)| p.clone());
        let physical = find(index).ok_or_else(|| no_such_device(index))?;
        let default = find(self.default).ok_or_else(|| no_such_device(self.default))?;
        let model = |p: &PhysicalDevice| (p.properties().device_name.clone(), p.properties().driver_version);
        if model(&physical) != model(&default) {
            return Err(Error::Argument(format!(
                "device {index} ({}) is another model than the default device {} ({}): nx_vulkan \
                 runs several devices of one model only (its kernel policy follows the default's \
                 class); choose it as the default with NXV_DEVICE={index}",
                physical.properties().device_name,
                self.default,
                default.properties().device_name
            )));
        }
        Ok(physical)
    }
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

/// Runs `create` (the instance, or a device's context) on a thread of its own (drivers want more
/// stack than a BEAM scheduler has). On a CPU device, the threads the driver started meanwhile
/// (lavapipe's, which run every kernel on the host's cores; at the BEAM's priority they kept
/// another process's 5 ms timer waiting up to ~47 ms on a 2-core machine) get `driver_nice()`:
/// they still have every core the schedulers leave idle.
///
/// The thread then stays (parked) for the VM's life: a driver may keep per-thread state for the
/// thread that created its instance, as it would for a thread that lives on in most programs.
fn on_init_thread<T: Send + 'static>(create: impl FnOnce() -> Result<T> + Send + 'static) -> std::result::Result<T, Error>
where
    T: CreatedOn,
{
    let nice = driver_nice()?;
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name("nx_vulkan_init".into())
        .stack_size(16 << 20)
        .spawn(move || {
            let before = threads();
            let created = std::panic::catch_unwind(std::panic::AssertUnwindSafe(create))
                .unwrap_or_else(|_| Err(Error::Vulkan("creating the Vulkan context panicked".into())));
            if matches!(&created, Ok(c) if c.on_cpu()) {
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

/// What `on_init_thread` makes: whether it runs on a CPU device (its new threads are niced).
trait CreatedOn {
    fn on_cpu(&self) -> bool;
}

impl CreatedOn for Context {
    fn on_cpu(&self) -> bool {
        self.info.device_type == "cpu"
    }
}

impl CreatedOn for Platform {
    fn on_cpu(&self) -> bool {
        false
    }
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
    fn create(index: usize, physical: &Arc<PhysicalDevice>, platform: &Platform) -> Result<Context> {
        let all_devices: Vec<(usize, String, &'static str)> = match &platform.logical {
            Some((n, p)) => {
                (0..*n).map(|i| (i, p.properties().device_name.clone(), type_name(p.properties().device_type))).collect()
            }
            None => platform
                .devices
                .iter()
                .map(|(i, p)| (*i, p.properties().device_name.clone(), type_name(p.properties().device_type)))
                .collect(),
        };
        let physical = physical.clone();
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
            subgroup_ballot: props.subgroup_supported_operations.is_some_and(|o| o.intersects(SubgroupFeatures::BALLOT))
                && props.subgroup_supported_stages.is_some_and(|s| s.intersects(ShaderStages::COMPUTE)),
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
            memory: Arc::new(crate::memory::BudgetAllocator::new(device.clone(), index)),
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
