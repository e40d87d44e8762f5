//! Compiles shaders/*.comp to SPIR-V in OUT_DIR (include_bytes! in main.rs).
fn main() {
    let compiler = shaderc::Compiler::new().expect("shaderc");
    let mut options = shaderc::CompileOptions::new().expect("shaderc options");
    options.set_target_env(shaderc::TargetEnv::Vulkan, shaderc::EnvVersion::Vulkan1_2 as u32);
    let out = std::env::var("OUT_DIR").unwrap();
    for name in ["bound", "bare", "address"] {
        let path = format!("shaders/{name}.comp");
        println!("cargo:rerun-if-changed={path}");
        let source = std::fs::read_to_string(&path).unwrap();
        let spirv = compiler
            .compile_into_spirv(&source, shaderc::ShaderKind::Compute, &path, "main", Some(&options))
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        std::fs::write(format!("{out}/{name}.spv"), spirv.as_binary_u8()).unwrap();
    }
}
