//! How much CPU the driver spends recording a dispatch, by what the dispatch carries (see
//! Cargo.toml for why this lives outside the NIF). On the first NVIDIA device, or the first
//! device:
//!
//!   cargo build --release --config ../../native/nx_vulkan/.cargo/config.toml   (how to link
//!       Debian's shaderc, as the NIF's build does)
//!   target/release/record_probe [dispatches]        (10000 by default)
//!
//! Each variant records the same number of one-workgroup dispatches into one command buffer,
//! five rounds, and prints the best and the median round's CPU time per dispatch spent in the
//! recording calls, then in vkEndCommandBuffer, and the GPU's wall time per dispatch (submission
//! to fence). The NIF records "push descriptors, 128 B" (plus a barrier where a hazard asks for
//! one, and a pipeline bind where the kernel changes).
use ash::vk;
#[path = "../../vk_probe_common.rs"]
mod common;
use common::{name, pick_device, storage_bindings};
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;
const PUSH_BYTES: u32 = 128;
/// Sets of three buffers `ManyBuffers` binds in turn (the first is every other variant's).
const SETS: usize = 16;
const BOUND: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/bound.spv"));
const BARE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/bare.spv"));
const ADDRESS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/address.spv"));

/// What each dispatch of a variant records besides vkCmdDispatch.
#[derive(Clone, Copy, PartialEq)]
enum Variant {
    /// No buffers, no push constants: the dispatch alone.
    Bare,
    /// Push constants only, of this many bytes.
    Constants(u32),
    /// Three push descriptors and push constants of this many bytes (the NIF's recording).
    PushDescriptors(u32),
    /// The NIF's recording with a global memory barrier before every dispatch.
    PushDescriptorsBarrier,
    /// The NIF's recording alternating two pipelines (a bind before every dispatch).
    PushDescriptorsRebind,
    /// A descriptor set written beforehand, bound before every dispatch, and 128 B of constants.
    BoundSet,
    /// The three buffers' device addresses and the size in 32 B of push constants: no descriptors.
    Addresses,
    /// The NIF's recording in command buffers of this many dispatches, each allocated, begun and
    /// ended on the way.
    Batches(u32),
    /// As `Batches`, the command buffers allocated before the round (vulkano's allocator hands
    /// out command buffers of a pool it resets once all of them are back, as the round's start
    /// does here), and with (`true`) or without each one opened by a full barrier; every one
    /// closed by a barrier to the host (the NIF's command buffers, opened with and without).
    Reused(u32, bool),
    /// The NIF's recording over 16 sets of three buffers in turn (the NIF's outputs come from a
    /// pool of many buffers; the other variants bind the same three every time).
    ManyBuffers,
}

impl Variant {
    fn name(self) -> String {
        match self {
            Variant::Bare => "dispatch alone".into(),
            Variant::Constants(b) => format!("push constants {b} B"),
            Variant::PushDescriptors(b) => {
                format!("3 push descriptors + {b} B{}", if b == PUSH_BYTES { " (the NIF's)" } else { "" })
            }
            Variant::PushDescriptorsBarrier => "NIF's + a barrier each".into(),
            Variant::PushDescriptorsRebind => "NIF's + a pipeline bind each".into(),
            Variant::BoundSet => "bound descriptor set + 128 B".into(),
            Variant::Addresses => "device addresses in 32 B".into(),
            Variant::Batches(k) => format!("NIF's, a command buffer every {k}"),
            Variant::ManyBuffers => "NIF's over 16 sets of buffers in turn".into(),
            Variant::Reused(k, opening) => format!(
                "NIF's, a reused command buffer every {k}, {} a barrier to the host",
                if opening { "opened by a full barrier, closed by" } else { "closed by" }
            ),
        }
    }
}

fn words(spirv: &[u8]) -> Vec<u32> {
    spirv.chunks_exact(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect()
}

fn main() {
    let dispatches: u32 = std::env::args().nth(1).map_or(10_000, |a| a.parse().expect("a number of dispatches"));
    unsafe { run(dispatches) }
}

unsafe fn run(dispatches: u32) {
    let entry = ash::Entry::load().expect("a Vulkan loader");
    let app = vk::ApplicationInfo::default().api_version(vk::make_api_version(0, 1, 2, 0));
    let instance = entry.create_instance(&vk::InstanceCreateInfo::default().application_info(&app), None).unwrap();
    let (pd, props, family) = pick_device(&instance);
    let priorities = [1.0f32];
    let queues = [vk::DeviceQueueCreateInfo::default().queue_family_index(family).queue_priorities(&priorities)];
    let extensions = [c"VK_KHR_push_descriptor".as_ptr()];
    let mut v12 = vk::PhysicalDeviceVulkan12Features::default().buffer_device_address(true);
    let features = vk::PhysicalDeviceFeatures::default().shader_int64(true);
    let create = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queues)
        .enabled_extension_names(&extensions)
        .enabled_features(&features)
        .push_next(&mut v12);
    let device = instance.create_device(pd, &create, None).expect("a device with push descriptors and device addresses");
    let queue = device.get_device_queue(family, 0);
    let push_descriptor = ash::khr::push_descriptor::Device::new(&instance, &device);
    println!(
        "device {}, driver {}, {dispatches} dispatches a round, best / median of {ROUNDS} rounds",
        name(&props.device_name),
        driver_version(props.vendor_id, props.driver_version)
    );

    // Small device-local buffers, with addresses: three for every variant, SETS times that for ManyBuffers.
    let memory = instance.get_physical_device_memory_properties(pd);
    let buffers: Vec<vk::Buffer> = (0..3 * SETS)
        .map(|_| {
            let usage = vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::SHADER_DEVICE_ADDRESS;
            let buf = device.create_buffer(&vk::BufferCreateInfo::default().size(4096).usage(usage), None).unwrap();
            let req = device.get_buffer_memory_requirements(buf);
            let index = (0..memory.memory_type_count)
                .find(|&i| {
                    req.memory_type_bits & (1 << i) != 0
                        && memory.memory_types[i as usize].property_flags.contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
                })
                .unwrap();
            let mut flags = vk::MemoryAllocateFlagsInfo::default().flags(vk::MemoryAllocateFlags::DEVICE_ADDRESS);
            let info = vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(index).push_next(&mut flags);
            let mem = device.allocate_memory(&info, None).unwrap();
            device.bind_buffer_memory(buf, mem, 0).unwrap();
            buf
        })
        .collect();
    let addresses: Vec<u64> =
        buffers.iter().map(|&b| device.get_buffer_device_address(&vk::BufferDeviceAddressInfo::default().buffer(b))).collect();

    // Layouts: set 0 as push descriptors (the NIF's), as an ordinary set, and none.
    let bindings = storage_bindings(3);
    let set_layout = |flags| {
        let info = vk::DescriptorSetLayoutCreateInfo::default().flags(flags).bindings(&bindings);
        device.create_descriptor_set_layout(&info, None).unwrap()
    };
    let push_set = [set_layout(vk::DescriptorSetLayoutCreateFlags::PUSH_DESCRIPTOR_KHR)];
    let plain_set = [set_layout(vk::DescriptorSetLayoutCreateFlags::empty())];
    let range = [vk::PushConstantRange::default().stage_flags(vk::ShaderStageFlags::COMPUTE).size(PUSH_BYTES)];
    let layout = |sets: &[vk::DescriptorSetLayout]| {
        let info = vk::PipelineLayoutCreateInfo::default().set_layouts(sets).push_constant_ranges(&range);
        device.create_pipeline_layout(&info, None).unwrap()
    };
    let (push_layout, plain_layout, bare_layout) = (layout(&push_set), layout(&plain_set), layout(&[]));
    let pipeline = |spirv: &[u8], layout| {
        let code = words(spirv);
        let module = device.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None).unwrap();
        let stage = vk::PipelineShaderStageCreateInfo::default().stage(vk::ShaderStageFlags::COMPUTE).module(module).name(c"main");
        let info = vk::ComputePipelineCreateInfo::default().stage(stage).layout(layout);
        device.create_compute_pipelines(vk::PipelineCache::null(), &[info], None).map_err(|e| e.1).unwrap()[0]
    };
    let pushed = [pipeline(BOUND, push_layout), pipeline(BOUND, push_layout)];
    let plain = pipeline(BOUND, plain_layout);
    let bare = pipeline(BARE, bare_layout);
    let address = pipeline(ADDRESS, bare_layout);

    let infos: Vec<[vk::DescriptorBufferInfo; 1]> =
        buffers.iter().map(|&b| [vk::DescriptorBufferInfo::default().buffer(b).range(vk::WHOLE_SIZE)]).collect();
    let write_sets: Vec<Vec<vk::WriteDescriptorSet>> = infos
        .chunks(3)
        .map(|set| {
            set.iter()
                .enumerate()
                .map(|(i, info)| {
                    vk::WriteDescriptorSet::default().dst_binding(i as u32).descriptor_type(vk::DescriptorType::STORAGE_BUFFER).buffer_info(info)
                })
                .collect()
        })
        .collect();
    let writes = &write_sets[0];
    let sizes = [vk::DescriptorPoolSize::default().ty(vk::DescriptorType::STORAGE_BUFFER).descriptor_count(3)];
    let pool = device.create_descriptor_pool(&vk::DescriptorPoolCreateInfo::default().max_sets(1).pool_sizes(&sizes), None).unwrap();
    let set = device.allocate_descriptor_sets(&vk::DescriptorSetAllocateInfo::default().descriptor_pool(pool).set_layouts(&plain_set)).unwrap()[0];
    let set_writes: Vec<_> = writes.iter().map(|w| w.dst_set(set)).collect();
    let addresses = &addresses[..3];
    device.update_descriptor_sets(&set_writes, &[]);

    let commands = device.create_command_pool(&vk::CommandPoolCreateInfo::default().queue_family_index(family), None).unwrap();
    let fence = device.create_fence(&vk::FenceCreateInfo::default(), None).unwrap();
    let barrier = [vk::MemoryBarrier::default().src_access_mask(vk::AccessFlags::SHADER_WRITE).dst_access_mask(vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE)];
    let compute = vk::PipelineStageFlags::COMPUTE_SHADER;
    let bind_point = vk::PipelineBindPoint::COMPUTE;

    let variants = [
        Variant::Bare,
        Variant::Constants(16),
        Variant::Constants(PUSH_BYTES),
        Variant::PushDescriptors(16),
        Variant::PushDescriptors(PUSH_BYTES),
        Variant::PushDescriptorsBarrier,
        Variant::PushDescriptorsRebind,
        Variant::BoundSet,
        Variant::Addresses,
        Variant::Batches(16),
        Variant::Batches(64),
        Variant::ManyBuffers,
        Variant::Reused(16, true),
        Variant::Reused(16, false),
        Variant::Reused(64, true),
        Variant::Reused(64, false),
    ];
    // The NIF's barriers around a command buffer: everything earlier before its first command,
    // its writes to the host after its last.
    let all_stages = vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER;
    let opening = [vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
        .dst_access_mask(vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE)];
    let closing = [vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
        .dst_access_mask(vk::AccessFlags::HOST_READ)];
    let spare = {
        let info = vk::CommandBufferAllocateInfo::default().command_pool(commands).command_buffer_count(dispatches / 16 + 1);
        device.allocate_command_buffers(&info).unwrap()
    };
    // What a clock read costs on this host (the NIF times its recording with two a command).
    let reads = 1_000_000;
    let started = Instant::now();
    let last = (0..reads).fold(started, |_, _| std::hint::black_box(Instant::now()));
    println!("Instant::now: {:.1} ns a read", (last - started).as_nanos() as f64 / reads as f64);
    println!("| per dispatch | recording, ns | vkEndCommandBuffer, ns | GPU wall, ns |");
    println!("|---|---|---|---|");
    for variant in variants {
        let mut rounds = Vec::new();
        for _ in 0..ROUNDS {
            device.reset_command_pool(commands, vk::CommandPoolResetFlags::empty()).unwrap();
            let (first, layout) = match variant {
                Variant::Bare | Variant::Constants(_) => (bare, bare_layout),
                Variant::BoundSet => (plain, plain_layout),
                Variant::Addresses => (address, bare_layout),
                _ => (pushed[0], push_layout),
            };
            let mut constants = [0u32; (PUSH_BYTES / 4) as usize];
            constants[0] = 64;
            // A command buffer allocated and begun, its pipeline bound and every variant's
            // constants defined (a dispatch reading constants never pushed is undefined:
            // lavapipe crashes), so the bare variant pushes none in the loop.
            let open = |constants: &[u32], n: usize| {
                let cb = if let Variant::Reused(..) = variant {
                    spare[n]
                } else {
                    let info = vk::CommandBufferAllocateInfo::default().command_pool(commands).command_buffer_count(1);
                    device.allocate_command_buffers(&info).unwrap()[0]
                };
                let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
                device.begin_command_buffer(cb, &begin).unwrap();
                device.cmd_bind_pipeline(cb, bind_point, first);
                let all = std::slice::from_raw_parts(constants.as_ptr() as *const u8, PUSH_BYTES as usize);
                device.cmd_push_constants(cb, layout, vk::ShaderStageFlags::COMPUTE, 0, all);
                if let Variant::Reused(_, true) = variant {
                    device.cmd_pipeline_barrier(cb, all_stages, all_stages, vk::DependencyFlags::empty(), &opening, &[], &[]);
                }
                cb
            };
            let close = |cb| {
                if let Variant::Reused(..) = variant {
                    device.cmd_pipeline_barrier(cb, all_stages, vk::PipelineStageFlags::HOST, vk::DependencyFlags::empty(), &closing, &[], &[]);
                }
                device.end_command_buffer(cb).unwrap();
            };
            let mut cbs = vec![open(&constants, 0)];
            let per_buffer = match variant {
                Variant::Batches(k) | Variant::Reused(k, _) => k,
                _ => u32::MAX,
            };
            let started = Instant::now();
            for i in 0..dispatches {
                if i > 0 && i % per_buffer == 0 {
                    // What the NIF's early submission does: a new command buffer every k commands.
                    close(*cbs.last().unwrap());
                    cbs.push(open(&constants, cbs.len()));
                }
                let cb = *cbs.last().unwrap();
                // The size changes from one dispatch to the next, as the NIF's do.
                constants[0] = 64 - (i & 1);
                let bytes = |n: u32| std::slice::from_raw_parts(constants.as_ptr() as *const u8, n as usize);
                match variant {
                    Variant::Bare => {}
                    Variant::Constants(n) => device.cmd_push_constants(cb, layout, vk::ShaderStageFlags::COMPUTE, 0, bytes(n)),
                    Variant::PushDescriptors(_)
                    | Variant::PushDescriptorsBarrier
                    | Variant::PushDescriptorsRebind
                    | Variant::Batches(_)
                    | Variant::Reused(..)
                    | Variant::ManyBuffers => {
                        let n = if let Variant::PushDescriptors(n) = variant { n } else { PUSH_BYTES };
                        if variant == Variant::PushDescriptorsBarrier {
                            device.cmd_pipeline_barrier(cb, compute, compute, vk::DependencyFlags::empty(), &barrier, &[], &[]);
                        }
                        if variant == Variant::PushDescriptorsRebind {
                            device.cmd_bind_pipeline(cb, bind_point, pushed[(i & 1) as usize]);
                        }
                        let writes = if variant == Variant::ManyBuffers { &write_sets[i as usize % SETS] } else { writes };
                        push_descriptor.cmd_push_descriptor_set(cb, bind_point, layout, 0, writes);
                        device.cmd_push_constants(cb, layout, vk::ShaderStageFlags::COMPUTE, 0, bytes(n));
                    }
                    Variant::BoundSet => {
                        device.cmd_bind_descriptor_sets(cb, bind_point, layout, 0, &[set], &[]);
                        device.cmd_push_constants(cb, layout, vk::ShaderStageFlags::COMPUTE, 0, bytes(PUSH_BYTES));
                    }
                    Variant::Addresses => {
                        let mut push = [0u32; 8];
                        for (k, a) in addresses.iter().enumerate() {
                            push[2 * k] = *a as u32;
                            push[2 * k + 1] = (*a >> 32) as u32;
                        }
                        push[6] = constants[0];
                        let bytes = std::slice::from_raw_parts(push.as_ptr() as *const u8, 32);
                        device.cmd_push_constants(cb, layout, vk::ShaderStageFlags::COMPUTE, 0, bytes);
                    }
                }
                device.cmd_dispatch(cb, 1, 1, 1);
            }
            let recorded = started.elapsed();
            let ending = Instant::now();
            close(*cbs.last().unwrap());
            let ended = ending.elapsed();
            let submitted = Instant::now();
            device.queue_submit(queue, &[vk::SubmitInfo::default().command_buffers(&cbs)], fence).unwrap();
            device.wait_for_fences(&[fence], true, u64::MAX).unwrap();
            let ran = submitted.elapsed();
            device.reset_fences(&[fence]).unwrap();
            if !matches!(variant, Variant::Reused(..)) {
                device.free_command_buffers(commands, &cbs);
            }
            rounds.push([recorded, ended, ran]);
        }
        let per = |k: usize, pick: fn(&mut Vec<Duration>) -> Duration| {
            let mut times: Vec<Duration> = rounds.iter().map(|r| r[k]).collect();
            pick(&mut times).as_nanos() as f64 / dispatches as f64
        };
        let best = |t: &mut Vec<Duration>| *t.iter().min().unwrap();
        let median = |t: &mut Vec<Duration>| {
            t.sort();
            t[t.len() / 2]
        };
        let cell = |k: usize| format!("{:.0} / {:.0}", per(k, best), per(k, median));
        println!("| {} | {} | {} | {} |", variant.name(), cell(0), cell(1), cell(2));
    }
}

/// NVIDIA packs its version as 10.8.8.6 bits; others as Vulkan's 10.10.12.
fn driver_version(vendor: u32, v: u32) -> String {
    if vendor == 0x10de {
        format!("{}.{}.{}", v >> 22, (v >> 14) & 0xff, (v >> 6) & 0xff)
    } else {
        format!("{}.{}.{}", vk::api_version_major(v), vk::api_version_minor(v), vk::api_version_patch(v))
    }
}
