"""The pinned runs of ``tests/pinned_runs.py`` end with the weights recorded before a move.

Moving code between modules (the trainer core, the collector, the algorithms)
must not change what PPO, APG and SHAC compute. The sums below were recorded
before the trainer-algorithm seam; ``benchmarks/pinned_weights.py`` compares
exact digests of two checkouts.
"""

import pytest
import torch

from tests.pinned_runs import RUNS, trained_modules

# Per tensor of the final modules: (sum, sum of absolute values), in float64.
PINNED: dict[str, dict[str, tuple[float, float]]] = {
    "ppo_pendulum": {
        "policy.log_std": (0.0005184072651900351, 0.0005184072651900351),
        "policy.obs_normalizers.obs.running_mean": (-1.6830529775394516, 1.6830529775394516),
        "policy.obs_normalizers.obs.running_var": (11.116415496245105, 11.116415496245105),
        "policy.actor.0.weight": (-3.8005561330355704, 13.971026784274727),
        "policy.actor.0.bias": (0.0018447741895215586, 0.04027998405217659),
        "policy.actor.2.weight": (0.02511062847042922, 0.06532367061299738),
        "policy.actor.2.bias": (0.0012659935746341944, 0.0012659935746341944),
        "policy.critic.0.weight": (-4.0548371113836765, 14.24066662415862),
        "policy.critic.0.bias": (0.050054511870257556, 0.23845124326180667),
        "policy.critic.2.weight": (0.39525610115379095, 3.012202442623675),
        "policy.critic.2.bias": (-0.015815235674381256, 0.015815235674381256),
    },
    "ppo_cartpole": {
        "policy.log_std": (0.0, 0.0),
        "policy.actor.0.weight": (-1.8724123516003601, 18.958445454307366),
        "policy.actor.0.bias": (0.02290204429300502, 0.058144856768194586),
        "policy.actor.2.weight": (0.006787480786442757, 0.7213061470538378),
        "policy.actor.2.bias": (0.0, 0.028007494285702705),
        "policy.critic.0.weight": (1.6481127068400383, 19.08990626782179),
        "policy.critic.0.bias": (-0.07216652855277061, 0.5780933015048504),
        "policy.critic.2.weight": (-0.517788365483284, 3.2823168262839317),
        "policy.critic.2.bias": (0.03606462851166725, 0.03606462851166725),
    },
    "ppo_cartpole_adaptive": {
        "policy.log_std": (0.0, 0.0),
        "policy.actor.0.weight": (-1.7492924556136131, 19.552205111831427),
        "policy.actor.0.bias": (0.17000894993543625, 0.3777049668133259),
        "policy.actor.2.weight": (0.006787493824958801, 1.8646767437458038),
        "policy.actor.2.bias": (-5.587935447692871e-09, 0.035240838304162025),
        "policy.critic.0.weight": (1.582087074406445, 18.869729961268604),
        "policy.critic.0.bias": (-0.19328488409519196, 1.5630394667387009),
        "policy.critic.2.weight": (-0.590259425342083, 3.639922894537449),
        "policy.critic.2.bias": (0.09741057455539703, 0.09741057455539703),
    },
    "apg_segmented": {
        "policy.log_std": (-0.9931675791740417, 0.9931675791740417),
        "policy.obs_normalizers.obs.running_mean": (-0.05787908859065283, 0.7734801634201176),
        "policy.obs_normalizers.obs.running_var": (11.534320565449358, 11.534320565449358),
        "policy.mean_net.0.weight": (-2.6644691042602062, 13.626647878438234),
        "policy.mean_net.0.bias": (0.018515665316954255, 0.29426105762831867),
        "policy.mean_net.2.weight": (0.19958000350743532, 0.5067531215026975),
        "policy.mean_net.2.bias": (-0.03309943526983261, 0.03309943526983261),
    },
    "apg_complete": {
        "policy.log_std": (-2.0182734727859497, 2.0182734727859497),
        "policy.obs_normalizers.obs.running_mean": (0.10387685842363224, 0.3738806981912527),
        "policy.obs_normalizers.obs.running_var": (1.9573222859490786, 1.9573222859490786),
        "policy.mean_net.0.weight": (-0.3437229339033365, 28.049309315159917),
        "policy.mean_net.0.bias": (0.027500674594193697, 0.11388510931283236),
        "policy.mean_net.2.weight": (-0.014118407852947712, 0.3081690613180399),
        "policy.mean_net.2.bias": (0.01651108032092452, 0.01651108032092452),
    },
    "shac_swingup": {
        "policy.log_std": (-0.9962604641914368, 0.9962604641914368),
        "policy.obs_normalizers.obs.running_mean": (-1.1990295713908097, 1.2391590616985297),
        "policy.obs_normalizers.obs.running_var": (0.0975795936359846, 0.0975795936359846),
        "policy.mean_net.0.weight": (2.580140933394432, 23.427654054015875),
        "policy.mean_net.0.bias": (0.024367799807805568, 0.03881676233140752),
        "policy.mean_net.2.weight": (0.008396368415560573, 0.05576814973028377),
        "policy.mean_net.2.bias": (-0.0010382500477135181, 0.0010382500477135181),
        "critic.0.weight": (-2.333921218290925, 23.90377134270966),
        "critic.0.bias": (0.014367890544235706, 0.13784773368388414),
        "critic.1.weight": (16.014437079429626, 16.014437079429626),
        "critic.1.bias": (0.027404891792684793, 0.13852682476863265),
        "critic.3.weight": (-0.5227768588811159, 3.34616513364017),
        "critic.3.bias": (0.008984233252704144, 0.008984233252704144),
        "target_critic.0.weight": (-2.334271090105176, 23.902575129643083),
        "target_critic.0.bias": (0.013936134055256844, 0.13347745686769485),
        "target_critic.1.weight": (16.01416105031967, 16.01416105031967),
        "target_critic.1.bias": (0.026623588055372238, 0.13348573818802834),
        "target_critic.3.weight": (-0.5232739131897688, 3.345984624698758),
        "target_critic.3.bias": (0.008660435676574707, 0.008660435676574707),
    },
}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_run_ends_with_the_recorded_weights(name: str) -> None:
    """Each pinned run ends with the recorded sums of every floating-point tensor."""
    modules = trained_modules(RUNS[name]())
    found = {
        f"{owner}.{key}": (float(value.double().sum()), float(value.double().abs().sum()))
        for owner, module in modules.items()
        for key, value in module.state_dict().items()
        if value.is_floating_point()
    }
    pinned = PINNED[name]
    assert found.keys() == pinned.keys()
    for key, recorded in pinned.items():
        assert torch.allclose(
            torch.tensor(found[key], dtype=torch.float64),
            torch.tensor(recorded, dtype=torch.float64),
            rtol=1e-6,
            atol=1e-7,
        ), f"{name} {key}: recorded {recorded}, got {found[key]}"
