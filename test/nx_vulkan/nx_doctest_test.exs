# Nx's own documentation examples, run with Nx.Vulkan.Backend as the default backend, checked for
# values (the doctest itself) and for residency (the residency register).
#
# Residency: every doctest runs in strict mode (host_fallback :raise for the test process), so a
# doctest whose work leaves the device fails, unless its function is in the register
# (test/support/residency_register.ex) with the reason. Registered doctests run in allow mode and
# must still fall back at least once: a stale entry fails too, so the register only shrinks.
defmodule Nx.Vulkan.NxDoctestTest do
  use ExUnit.Case, async: true
  alias Nx.Vulkan.{Fallback, ResidencyRegister}

  setup context do
    Fallback.put_process_mode(:raise)
    ResidencyRegister.count(:resident, context.test)
    :ok
  end

  doctest Nx, except: ResidencyRegister.doctest_exclusions(Nx)
end

defmodule Nx.Vulkan.NxDoctestRegisterTest do
  use ExUnit.Case, async: true
  alias Nx.Vulkan.{Fallback, ResidencyRegister}

  setup context do
    Fallback.put_process_mode(:allow)
    Fallback.tag_process(context.test)
    ResidencyRegister.count(:registered, context.test)

    on_exit(fn ->
      if Fallback.tagged(context.test) == 0 do
        flunk("#{context.test} is in the residency register but no longer falls back: remove its entry")
      end
    end)
  end

  doctest Nx, only: ResidencyRegister.registered(Nx)
end
