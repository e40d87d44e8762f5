defmodule Nx.Vulkan.ResidencyRegister do
  @moduledoc false
  # Doctests whose work leaves the device, by function, with the reason (see
  # test/nx_vulkan/nx_doctest_test.exs). An entry is removed when its function becomes resident;
  # the doctest test fails for a new fallback and for a stale entry alike.
  @register %{
    Nx => %{}
  }

  def registered(module), do: Map.keys(Map.fetch!(@register, module))
  def doctest_exclusions(module), do: registered(module)
  def reason(module, fun), do: get_in(@register, [module, fun])

  @table __MODULE__

  def start, do: :ets.new(@table, [:named_table, :public, :set, write_concurrency: true])

  def count(kind, _test), do: :ets.update_counter(@table, kind, 1, {kind, 0})

  def report do
    counts = Map.new(:ets.tab2list(@table))
    resident = Map.get(counts, :resident, 0)
    registered = Map.get(counts, :registered, 0)

    if resident + registered > 0 do
      share = Float.round(100 * resident / (resident + registered), 1)

      IO.puts(
        "\nNx doctest residency: #{resident} of #{resident + registered} doctests stay on the device " <>
          "(#{share}%); #{registered} in the register (#{length(registered(Nx))} functions)"
      )
    end
  end
end
