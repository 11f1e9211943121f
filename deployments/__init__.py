"""deployments"""
