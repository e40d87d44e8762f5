# Every test runs with Nx.Vulkan.Backend as the default backend, in every process.
Nx.global_default_backend(Nx.Vulkan.Backend)
ExUnit.start()
