"""The wire contract: commands, domain events, their envelope and the fairness of deals."""
