from net.client import request


def run():
    return request('/api/4')
