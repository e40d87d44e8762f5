//! Times gemm_cm2.comp (see Cargo.toml for why this lives outside the NIF) on the first NVIDIA
//! device, or the first device: inputs of ones, so every result must equal K.
//!
//!   cargo run --release -- <f16|bf16> M N K BM BN BK THREADS
//!
//! Prints the driver's statistics for the pipeline (VK_KHR_pipeline_executable_properties:
//! registers, shared memory, ...) and the GPU time per GEMM (timestamps around 20 dispatches,
//! four rounds). ash 0.38 predates VK_NV_cooperative_matrix2 and VK_KHR_shader_bfloat16, so
//! their feature structures are declared here.
use ash::vk;
#[path = "../../vk_probe_common.rs"]
mod common;
use common::{name, pick_device, storage_bindings};
use std::ffi::c_void;

/// VkPhysicalDeviceCooperativeMatrix2FeaturesNV: workgroup scope, flexible dimensions,
/// reductions, conversions, per-element operations, tensor addressing, block loads.
#[repr(C)]
struct CoopMat2Features {
    s_type: vk::StructureType,
    p_next: *mut c_void,
    features: [vk::Bool32; 7],
}

/// VkPhysicalDeviceShaderBfloat16FeaturesKHR: type, dot product, cooperative matrix.
#[repr(C)]
struct Bf16Features {
    s_type: vk::StructureType,
    p_next: *mut c_void,
    features: [vk::Bool32; 3],
}

const COOPMAT2_FEATURES: i32 = 1000593000;
const BF16_FEATURES: i32 = 1000141000;
const REPS: u32 = 20;

fn compile(defines: &[(&str, Option<&str>)]) -> Vec<u32> {
    let source = glslang::ShaderSource::from(include_str!("../gemm_cm2.comp"));
    let options = glslang::CompilerOptions {
        source_language: glslang::SourceLanguage::GLSL,
        target: glslang::Target::Vulkan {
            version: glslang::VulkanVersion::Vulkan1_3,
            spirv_version: glslang::SpirvVersion::SPIRV1_6,
        },
        version_profile: None,
        messages: glslang::ShaderMessage::DEFAULT,
    };
    let compiler = glslang::Compiler::acquire().expect("glslang");
    let input = glslang::ShaderInput::new(&source, glslang::ShaderStage::Compute, &options, Some(defines), None)
        .expect("shader input");
    compiler.create_shader(input).and_then(|s| s.compile()).expect("compiling gemm_cm2.comp")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    assert_eq!(args.len(), 8, "usage: coopmat_probe <f16|bf16> M N K BM BN BK THREADS");
    let (ty, out, pattern, out_bytes) = match args[0].as_str() {
        "f16" => ("float16_t", "float16_t", 0x3c00_3c00u32, 2u64),
        "bf16" => ("bfloat16_t", "float", 0x3f80_3f80, 4),
        other => panic!("type must be f16 or bf16, got {other}"),
    };
    let dims: Vec<u32> = args[1..].iter().map(|a| a.parse().expect("a number")).collect();
    let [m, n, k, bm, bn, _, threads] = dims[..] else { unreachable!() };
    let defines = [
        ("TYPE", Some(ty)),
        ("OUT", Some(out)),
        ("BM", Some(args[4].as_str())),
        ("BN", Some(args[5].as_str())),
        ("BK", Some(args[6].as_str())),
        ("THREADS", Some(args[7].as_str())),
    ];
    let spirv = compile(&defines);
    unsafe { run(&spirv, [m, n, k], [bm, bn], threads, pattern, out_bytes) }
}

unsafe fn run(spirv: &[u32], [m, n, k]: [u32; 3], [bm, bn]: [u32; 2], threads: u32, pattern: u32, out_bytes: u64) {
    let entry = ash::Entry::load().expect("a Vulkan loader");
    let app = vk::ApplicationInfo::default().api_version(vk::make_api_version(0, 1, 3, 0));
    let instance = entry.create_instance(&vk::InstanceCreateInfo::default().application_info(&app), None).unwrap();
    let (pd, props, family) = pick_device(&instance);
    println!("device {}, {threads} threads, {bm}x{bn} blocks", name(&props.device_name));
    let extensions: Vec<String> =
        instance.enumerate_device_extension_properties(pd).unwrap().iter().map(|e| name(&e.extension_name)).collect();
    let stats = extensions.iter().any(|e| e == "VK_KHR_pipeline_executable_properties");

    // What the driver offers, then the same enabled.
    let mut coopmat2 = CoopMat2Features { s_type: vk::StructureType::from_raw(COOPMAT2_FEATURES), p_next: std::ptr::null_mut(), features: [0; 7] };
    let mut bf16 = Bf16Features { s_type: vk::StructureType::from_raw(BF16_FEATURES), p_next: &mut coopmat2 as *mut _ as *mut c_void, features: [0; 3] };
    let mut query = vk::PhysicalDeviceFeatures2 { p_next: &mut bf16 as *mut _ as *mut c_void, ..Default::default() };
    instance.get_physical_device_features2(pd, &mut query);
    println!("cooperative matrix 2 features {:?}, bf16 features {:?}", coopmat2.features, bf16.features);
    let priorities = [1.0f32];
    let queues = [vk::DeviceQueueCreateInfo::default().queue_family_index(family).queue_priorities(&priorities)];
    let mut names = vec![c"VK_KHR_cooperative_matrix".as_ptr(), c"VK_NV_cooperative_matrix2".as_ptr(), c"VK_KHR_shader_bfloat16".as_ptr()];
    if stats {
        names.push(c"VK_KHR_pipeline_executable_properties".as_ptr());
    }
    let mut executable_info = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default().pipeline_executable_info(stats);
    let mut coopmat = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default().cooperative_matrix(true);
    let mut v11 = vk::PhysicalDeviceVulkan11Features::default().storage_buffer16_bit_access(true);
    let mut v12 = vk::PhysicalDeviceVulkan12Features::default().shader_float16(true).vulkan_memory_model(true).vulkan_memory_model_device_scope(true);
    let mut v13 = vk::PhysicalDeviceVulkan13Features::default().maintenance4(true);
    v13.p_next = &mut bf16 as *mut _ as *mut c_void;
    let features = vk::PhysicalDeviceFeatures::default().shader_int16(true);
    let create = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queues)
        .enabled_extension_names(&names)
        .enabled_features(&features)
        .push_next(&mut executable_info)
        .push_next(&mut coopmat)
        .push_next(&mut v11)
        .push_next(&mut v12)
        .push_next(&mut v13);
    let device = instance.create_device(pd, &create, None).expect("a device with the cooperative-matrix extensions");
    let queue = device.get_device_queue(family, 0);

    let memory = instance.get_physical_device_memory_properties(pd);
    let buffer = |size: u64, host: bool| {
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_DST | vk::BufferUsageFlags::TRANSFER_SRC;
        let buf = device.create_buffer(&vk::BufferCreateInfo::default().size(size).usage(usage), None).unwrap();
        let req = device.get_buffer_memory_requirements(buf);
        let want = if host {
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT
        } else {
            vk::MemoryPropertyFlags::DEVICE_LOCAL
        };
        let index = (0..memory.memory_type_count)
            .find(|&i| req.memory_type_bits & (1 << i) != 0 && memory.memory_types[i as usize].property_flags.contains(want))
            .unwrap();
        let mem = device.allocate_memory(&vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(index), None).unwrap();
        device.bind_buffer_memory(buf, mem, 0).unwrap();
        (buf, mem)
    };
    let (a, _) = buffer(m as u64 * k as u64 * 2, false);
    let (b, _) = buffer(k as u64 * n as u64 * 2, false);
    let (c, _) = buffer(m as u64 * n as u64 * out_bytes, false);
    let (readback, readback_mem) = buffer(16, true);

    let module = device.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(spirv), None).unwrap();
    let bindings = storage_bindings(3);
    let set_layouts = [device.create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings), None).unwrap()];
    let push = [vk::PushConstantRange::default().stage_flags(vk::ShaderStageFlags::COMPUTE).size(16)];
    let layout = device.create_pipeline_layout(&vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts).push_constant_ranges(&push), None).unwrap();
    let stage = vk::PipelineShaderStageCreateInfo::default().stage(vk::ShaderStageFlags::COMPUTE).module(module).name(c"main");
    let flags = if stats { vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR } else { vk::PipelineCreateFlags::empty() };
    let started = std::time::Instant::now();
    let pipeline = device
        .create_compute_pipelines(vk::PipelineCache::null(), &[vk::ComputePipelineCreateInfo::default().stage(stage).layout(layout).flags(flags)], None)
        .map_err(|e| e.1)
        .expect("the pipeline")[0];
    println!("pipeline built in {:?}", started.elapsed());
    if stats {
        let properties = ash::khr::pipeline_executable_properties::Device::new(&instance, &device);
        let info = vk::PipelineExecutableInfoKHR::default().pipeline(pipeline).executable_index(0);
        for s in properties.get_pipeline_executable_statistics(&info).unwrap_or_default() {
            let value = match s.format {
                vk::PipelineExecutableStatisticFormatKHR::BOOL32 => s.value.b32.to_string(),
                vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64.to_string(),
                vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64.to_string(),
                _ => s.value.f64.to_string(),
            };
            println!("  {} = {value}", name(&s.name));
        }
    }

    let sizes = [vk::DescriptorPoolSize::default().ty(vk::DescriptorType::STORAGE_BUFFER).descriptor_count(3)];
    let pool = device.create_descriptor_pool(&vk::DescriptorPoolCreateInfo::default().max_sets(1).pool_sizes(&sizes), None).unwrap();
    let set = device.allocate_descriptor_sets(&vk::DescriptorSetAllocateInfo::default().descriptor_pool(pool).set_layouts(&set_layouts)).unwrap()[0];
    let infos: Vec<[vk::DescriptorBufferInfo; 1]> = [a, b, c].iter().map(|&x| [vk::DescriptorBufferInfo::default().buffer(x).range(vk::WHOLE_SIZE)]).collect();
    let writes: Vec<_> = infos
        .iter()
        .enumerate()
        .map(|(i, info)| vk::WriteDescriptorSet::default().dst_set(set).dst_binding(i as u32).descriptor_type(vk::DescriptorType::STORAGE_BUFFER).buffer_info(info))
        .collect();
    device.update_descriptor_sets(&writes, &[]);
    let timestamps = device.create_query_pool(&vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(2), None).unwrap();
    let commands = device.create_command_pool(&vk::CommandPoolCreateInfo::default().queue_family_index(family), None).unwrap();
    let cb = device.allocate_command_buffers(&vk::CommandBufferAllocateInfo::default().command_pool(commands).command_buffer_count(1)).unwrap()[0];
    let barrier = |cb, src: vk::AccessFlags, dst: vk::AccessFlags, from, to| {
        let mb = [vk::MemoryBarrier::default().src_access_mask(src).dst_access_mask(dst)];
        device.cmd_pipeline_barrier(cb, from, to, vk::DependencyFlags::empty(), &mb, &[], &[]);
    };
    for round in 0..4 {
        device.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default()).unwrap();
        if round == 0 {
            device.cmd_fill_buffer(cb, a, 0, vk::WHOLE_SIZE, pattern);
            device.cmd_fill_buffer(cb, b, 0, vk::WHOLE_SIZE, pattern);
            barrier(cb, vk::AccessFlags::TRANSFER_WRITE, vk::AccessFlags::SHADER_READ, vk::PipelineStageFlags::TRANSFER, vk::PipelineStageFlags::COMPUTE_SHADER);
        }
        device.cmd_reset_query_pool(cb, timestamps, 0, 2);
        device.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, pipeline);
        device.cmd_bind_descriptor_sets(cb, vk::PipelineBindPoint::COMPUTE, layout, 0, &[set], &[]);
        let sizes = [m, n, k, 0u32];
        device.cmd_push_constants(cb, layout, vk::ShaderStageFlags::COMPUTE, 0, std::slice::from_raw_parts(sizes.as_ptr() as *const u8, 16));
        device.cmd_write_timestamp(cb, vk::PipelineStageFlags::TOP_OF_PIPE, timestamps, 0);
        for _ in 0..REPS {
            device.cmd_dispatch(cb, n.div_ceil(bn), m.div_ceil(bm), 1);
        }
        device.cmd_write_timestamp(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, timestamps, 1);
        barrier(cb, vk::AccessFlags::SHADER_WRITE, vk::AccessFlags::TRANSFER_READ, vk::PipelineStageFlags::COMPUTE_SHADER, vk::PipelineStageFlags::TRANSFER);
        device.cmd_copy_buffer(cb, c, readback, &[vk::BufferCopy::default().size(16)]);
        device.end_command_buffer(cb).unwrap();
        let fence = device.create_fence(&vk::FenceCreateInfo::default(), None).unwrap();
        device.queue_submit(queue, &[vk::SubmitInfo::default().command_buffers(&[cb])], fence).unwrap();
        device.wait_for_fences(&[fence], true, u64::MAX).unwrap();
        device.destroy_fence(fence, None);
        let mut ticks = [0u64; 2];
        device.get_query_pool_results(timestamps, 0, &mut ticks, vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT).unwrap();
        let us = (ticks[1] - ticks[0]) as f64 * props.limits.timestamp_period as f64 / 1000.0 / REPS as f64;
        let first = *(device.map_memory(readback_mem, 0, 16, vk::MemoryMapFlags::empty()).unwrap() as *const u32);
        device.unmap_memory(readback_mem);
        let c0 = if out_bytes == 4 { f32::from_bits(first) } else { half_to_f32(first as u16) };
        let tflops = 2.0 * m as f64 * n as f64 * k as f64 / us / 1e6;
        println!("round {round}: {us:.1} us per GEMM, {tflops:.1} TFLOP/s, c[0] = {c0} (K = {k})");
        device.reset_command_buffer(cb, vk::CommandBufferResetFlags::empty()).unwrap();
    }
}

/// An f16's value (normal numbers and zero; enough for the check).
fn half_to_f32(h: u16) -> f32 {
    let exp = ((h >> 10) & 0x1f) as i32;
    let frac = (h & 0x3ff) as f32 / 1024.0;
    if exp == 0 {
        0.0
    } else {
        (1.0 + frac) * 2f32.powi(exp - 15)
    }
}
