-- Argo CD health check for kafkamirror.io/KafkaMirror.
--
-- Argo CD runs this with the live object in `obj` and reads the returned table's `status`
-- (Healthy, Progressing, Degraded, Suspended) and `message`. It is installed through the
-- argocd-cm key resource.customizations.health.kafkamirror.io_KafkaMirror (see argocd-cm.yaml).
--
-- A status written for an older metadata.generation describes a spec that no longer exists:
-- it is reported as Progressing, never as Healthy or Degraded, so a sync that changed the
-- spec waits until the operator has reconciled the change.

-- Ready=False reasons (api/v1alpha1/conditions.go) that clear by themselves while the operator
-- works: pods starting or rolling out, a change being applied. Any other reason (InvalidSpec,
-- SecretNotFound, TopicsNotSynced, ...) needs a person: Degraded.
local transientReasons = {
  DeploymentNotReady = true,
  Progressing = true,
}

-- Ready=False reasons for a mirror stopped on purpose: spec.paused, or spec.replicas 0.
local suspendedReasons = {
  Paused = true,
  ScaledToZero = true,
}

local function condition(conditions, conditionType)
  for _, c in ipairs(conditions) do
    if c.type == conditionType then
      return c
    end
  end
  return nil
end

-- describe formats a condition as "Reason: message" for Argo CD's UI.
local function describe(c)
  local reason = c.reason or ""
  local message = c.message or ""
  if reason ~= "" and message ~= "" then
    return reason .. ": " .. message
  end
  if message ~= "" then
    return message
  end
  return reason
end

local function health(obj)
  local generation = obj.metadata.generation
  local status = obj.status or {}
  local conditions = status.conditions or {}

  -- current is true when a condition was written for this generation. Conditions carry their
  -- own observedGeneration; status.observedGeneration moves only after a successful
  -- reconcile, so a Stalled spec is recognised by the condition's stamp alone.
  local function current(c)
    local observed = c.observedGeneration or status.observedGeneration
    return generation == nil or observed == generation
  end

  local stalled = condition(conditions, "Stalled")
  if stalled ~= nil and stalled.status == "True" and current(stalled) then
    return "Degraded", describe(stalled)
  end
  if obj.spec ~= nil and obj.spec.paused == true then
    return "Suspended", "Mirroring is paused (spec.paused is true)"
  end
  if status.observedGeneration == nil then
    return "Progressing", "Waiting for the operator to report status"
  end
  if generation ~= nil and status.observedGeneration ~= generation then
    return "Progressing", string.format("Waiting for the operator to reconcile generation %d (status is for generation %d)",
      generation, status.observedGeneration)
  end

  local reconciling = condition(conditions, "Reconciling")
  if reconciling ~= nil and reconciling.status == "True" then
    return "Progressing", describe(reconciling)
  end
  local ready = condition(conditions, "Ready")
  if ready == nil or not current(ready) then
    return "Progressing", "Waiting for the Ready condition of the current generation"
  end
  if ready.status == "True" then
    return "Healthy", describe(ready)
  end
  if ready.status == "False" and suspendedReasons[ready.reason or ""] then
    return "Suspended", describe(ready)
  end
  if ready.status == "False" and not transientReasons[ready.reason or ""] then
    return "Degraded", describe(ready)
  end
  return "Progressing", describe(ready)
end

local hs = {}
hs.status, hs.message = health(obj)
return hs
