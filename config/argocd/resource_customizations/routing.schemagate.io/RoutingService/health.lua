-- Argo CD health check for schemagate's RoutingService (routing.schemagate.io/v1alpha1).
--
-- Healthy     the current generation is promoted in every shard (Ready=True for this generation),
--             also while the schema's contract migration waits (ContractReady=False: the app
--             serves; the message says what the contract waits for) or runs
-- Progressing no status yet, a generation schemagate has not observed yet, or a
--             migration / shard promotion under way
-- Degraded    Stalled=True: a migration failed or ran past its deadline, a shard missed its
--             progress deadline, a shard check failed, the rollout was aborted, a rollback was
--             refused because the database is past the revision's schema range (RollbackRefused),
--             or the database is ahead of a serving revision (DatabaseAhead)
-- Suspended   spec.paused is true, or a shard holds on an inconclusive check
--             (Reconciling=True, ShardCheckInconclusive) until a person promotes or aborts,
--             as a paused Argo Rollout reads
--
-- Conditions count only when their observedGeneration is the object's generation, so a Ready=True
-- left over from the previous generation never reads as Healthy.
local hs = {}

local generation = 0
if obj.metadata ~= nil and obj.metadata.generation ~= nil then
  generation = obj.metadata.generation
end

if obj.status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for schemagate to reconcile the RoutingService"
  return hs
end

local observed = obj.status.observedGeneration or 0
if observed < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for schemagate to observe generation " .. generation
  return hs
end

local function current(conditionType)
  if obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == conditionType and (c.observedGeneration or 0) >= generation then
      return c
    end
  end
  return nil
end

local stalled = current("Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = stalled.reason .. ": " .. (stalled.message or "")
  return hs
end

if obj.spec ~= nil and obj.spec.paused == true then
  hs.status = "Suspended"
  hs.message = "spec.paused is true: schemagate scales nothing until it is false"
  return hs
end

local reconciling = current("Reconciling")
if reconciling ~= nil and reconciling.status == "True" and reconciling.reason == "ShardCheckInconclusive" then
  hs.status = "Suspended"
  hs.message = reconciling.reason .. ": " .. (reconciling.message or "")
  return hs
end

local ready = current("Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or ""
  local contract = current("ContractReady")
  if contract ~= nil and contract.status == "False" then
    hs.message = hs.message .. "; the contract waits (" .. (contract.reason or "") .. "): " .. (contract.message or "")
  end
  return hs
end

hs.status = "Progressing"
if ready ~= nil then
  hs.message = ready.reason .. ": " .. (ready.message or "")
else
  hs.message = "Waiting for schemagate to report the rollout"
end
return hs
