import Config

# :allow | :warn | :raise - what a host fallback does (NXV_HOST_FALLBACK overrides).
config :nx_vulkan, host_fallback: :allow

if config_env() == :test do
  # Nx's doctests compare inspect output, which must not carry the backend's name.
  config :nx_vulkan, add_backend_on_inspect: false
end
