defmodule Nx.Vulkan.Error do
  @moduledoc """
  Raised when the device fails (no Vulkan loader or device, out of memory, a failed submission),
  or, in strict mode (`host_fallback: :raise`), when an op would leave the device.
  Bad arguments raise `ArgumentError` instead.
  """
  defexception [:message]
end
