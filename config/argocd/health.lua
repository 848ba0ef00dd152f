-- Argo CD health check for kafkamirror.io/KafkaMirror.
--
-- Argo CD runs this with the live object in `obj` and reads the returned table's `status`
-- (Healthy, Progressing, Degraded, Suspended) and `message`. It is installed through the
-- argocd-cm key resource.customizations.health.kafkamirror.io_KafkaMirror (see argocd-cm.yaml).
--
-- In order: Stalled=True for this generation -> Degraded; a declared failover (FailedOver
-- condition) -> Healthy once completed, Degraded when it failed, Progressing while it runs;
-- spec.paused -> Suspended; no Ready
-- condition yet, or one written for an older generation -> Progressing (a sync that changed the
-- spec waits for the operator); Ready=False because paused or scaled to 0 -> Suspended;
-- Ready=False for a reason a person must fix -> Degraded; Reconciling=True or Ready not True ->
-- Progressing; Ready=True once status.observedGeneration caught up -> Healthy.

-- Ready=False reasons (api/v1alpha1/conditions.go) that clear by themselves while the operator
-- works: pods starting or rolling out, a change being applied, a failover to complete. Any other reason (InvalidSpec,
-- SecretNotFound, TopicsNotSynced, CrashLoop, ImagePull, Unschedulable, RolloutStuck, ...) needs
-- a person: Degraded.
local transientReasons = {
  DeploymentNotReady = true,
  Progressing = true,
  -- A failback mirror (spec.initialPositions.fromFailover) waiting for the failover it
  -- starts from to complete; FailoverNotUsable, which needs a person, is Stalled.
  WaitingForFailover = true,
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

  -- observed is the generation a condition was written for. The operator stamps every
  -- condition each reconcile, while status.observedGeneration moves only after a reconcile
  -- that succeeded, so a spec that cannot be reconciled (a stalled spec, a missing Secret)
  -- is recognised by its conditions' stamps.
  local function observed(c)
    return c.observedGeneration or status.observedGeneration
  end
  local function current(c)
    return generation == nil or observed(c) == generation
  end

  local stalled = condition(conditions, "Stalled")
  if stalled ~= nil and stalled.status == "True" and current(stalled) then
    return "Degraded", describe(stalled)
  end
  -- spec.failover: a completed failover is the state asked for (the mirror stays stopped
  -- on purpose), a failed one needs a person.
  local failedOver = condition(conditions, "FailedOver")
  if failedOver ~= nil and current(failedOver) then
    if failedOver.status == "True" then
      return "Healthy", describe(failedOver)
    end
    if failedOver.reason == "FailoverFailed" then
      return "Degraded", describe(failedOver)
    end
    return "Progressing", describe(failedOver)
  end
  if obj.spec ~= nil and obj.spec.paused == true then
    return "Suspended", "Mirroring is paused (spec.paused is true)"
  end

  local ready = condition(conditions, "Ready")
  if ready == nil then
    return "Progressing", "Waiting for the operator to report status"
  end
  if not current(ready) then
    return "Progressing", string.format("Waiting for the operator to reconcile generation %d (status is for generation %d)",
      generation, observed(ready) or 0)
  end
  if ready.status == "False" and suspendedReasons[ready.reason or ""] then
    return "Suspended", describe(ready)
  end
  -- Checked before Reconciling: the operator keeps retrying a missing Secret or an
  -- unreachable cluster (Reconciling=True), but only a person can end that wait.
  if ready.status == "False" and not transientReasons[ready.reason or ""] then
    return "Degraded", describe(ready)
  end

  local reconciling = condition(conditions, "Reconciling")
  if reconciling ~= nil and reconciling.status == "True" and current(reconciling) then
    return "Progressing", describe(reconciling)
  end
  if ready.status ~= "True" then
    return "Progressing", describe(ready)
  end
  -- Ready=True counts only once a reconcile of this generation succeeded.
  if generation ~= nil and status.observedGeneration ~= generation then
    return "Progressing", string.format("Waiting for the operator to finish reconciling generation %d", generation)
  end
  return "Healthy", describe(ready)
end

local hs = {}
hs.status, hs.message = health(obj)
return hs
