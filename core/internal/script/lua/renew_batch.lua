-- renew_batch: renew (or check) a chunk of holds in one call — the renewal
-- loop's way on a single Redis node, where one script call per chunk costs
-- the server a fraction of one call per hold. Each item is what
-- mutex_renew or lease_renew would do with the same keys and arguments.
-- Needs lib_fence, lib_lease and lib_renew.
--
-- KEYS     the items' keys, in order: one per owner item (the lock hash),
--          two per holder item (holders zset, holders hash)
-- ARGV     four per item: 'o' (as mutex_renew) or 'h' (as lease_renew),
--          the owner or holder id, the lease in ms (0: check only), the
--          hold's fencing token
--
-- Returns one integer per item, in order: 1 still held, 0 lost. An item
-- whose keys hold foreign values is lost; the others are renewed.
local now = now_ms()
local out = {}
local k = 1
for i = 1, #ARGV, 4 do
  local lease = tonumber(ARGV[i + 2])
  if ARGV[i] == 'o' then
    out[#out + 1] = renew_safely(renew_owner, KEYS[k], ARGV[i + 1], ARGV[i + 3], lease)
    k = k + 1
  else
    out[#out + 1] = renew_safely(renew_holder, KEYS[k], KEYS[k + 1], ARGV[i + 1], ARGV[i + 3], lease, now)
    k = k + 2
  end
end
return out
