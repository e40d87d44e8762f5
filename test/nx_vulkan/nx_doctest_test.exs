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
    # Nx's examples expect bad operands to raise at the call (triangular_solve's singular matrix):
    # that is the immediate check mode; deferred checks are tested in errors_test.exs.
    Nx.Vulkan.put_check_mode(:immediate)
    ResidencyRegister.count(:resident, context)
    :ok
  end

  doctest Nx, except: ResidencyRegister.doctest_exclusions(Nx)
  doctest Nx.LinAlg, except: ResidencyRegister.doctest_exclusions(Nx.LinAlg)
end

# The doctests of functions Nx deprecates (Nx.reflect/2, for pad_outer/3) call them, and the
# compiler warns at each call: `mix test --warnings-as-errors` (scripts/test.sh) would fail on
# Nx's own examples. So they are compiled apart, in a process of their own (outside the
# test-file compiler, which would report the warnings), with the deprecation warnings collected
# rather than reported; any other diagnostic stops the suite. They run as the module above does.
{_, diagnostics} =
  Task.async(fn ->
    Code.with_diagnostics(fn ->
      Code.compile_quoted(
        quote do
          defmodule Nx.Vulkan.NxDeprecatedDoctestTest do
            use ExUnit.Case, async: true

            setup context do
              Nx.Vulkan.Fallback.put_process_mode(:raise)
              Nx.Vulkan.put_check_mode(:immediate)
              Nx.Vulkan.ResidencyRegister.count(:resident, context)
              :ok
            end

            doctest Nx, only: Nx.Vulkan.ResidencyRegister.deprecated(Nx)
            doctest Nx.LinAlg, only: Nx.Vulkan.ResidencyRegister.deprecated(Nx.LinAlg)
          end
        end,
        __ENV__.file
      )
    end)
  end)
  |> Task.await(:infinity)

case Enum.reject(diagnostics, &(&1.severity == :warning and &1.message =~ " is deprecated. ")) do
  [] -> :ok
  other -> raise "compiling Nx's deprecated doctests: " <> Enum.map_join(other, "; ", & &1.message)
end

defmodule Nx.Vulkan.NxDoctestRegisterTest do
  use ExUnit.Case, async: true
  alias Nx.Vulkan.{Fallback, ResidencyRegister}

  setup context do
    Fallback.put_process_mode(:allow)
    Nx.Vulkan.put_check_mode(:immediate)
    Fallback.tag_process({ResidencyRegister.entry_of(context.test), context.test})
    ResidencyRegister.count(:registered, context)
    :ok
  end

  doctest Nx, only: ResidencyRegister.registered(Nx)
  doctest Nx.LinAlg, only: ResidencyRegister.registered(Nx.LinAlg)
end

# Synchronous, so ExUnit runs it after every async module above: each register entry (a function's
# doctests) must still have fallen back at least once, else it is stale.
defmodule Nx.Vulkan.NxDoctestRegisterStaleTest do
  use ExUnit.Case, async: false
  alias Nx.Vulkan.{Fallback, ResidencyRegister}

  test "every residency register entry still falls back" do
    fell_back =
      Enum.reduce(Fallback.tag_counts(), %{}, fn
        {{{_module, _entry} = entry, _test}, n}, acc -> Map.update(acc, entry, n, &(&1 + n))
        _, acc -> acc
      end)

    stale =
      for module <- [Nx, Nx.LinAlg],
          entry <- ResidencyRegister.registered(module),
          Map.get(fell_back, {module, entry}, 0) == 0,
          do: {module, entry}

    assert stale == [], "register entries that no longer fall back (remove them): #{inspect(stale)}"
  end
end
